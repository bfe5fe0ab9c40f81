"""Every op of issue 2, driven by ONE table: forward vs numpy, gradients vs float64 central differences,
non-contiguous inputs, float32 and float64, and int64/bool inputs where they mean something.

Each row: Op(name, fn(m, *tensors), np_fn(*float64 arrays), cases, options). `fn` takes the module first so the
same row runs on dyngrad, dyngrad.reference (test_ops, test_differential) and torch (test_torch_oracle).
A case lists the inputs: a shape (normal floats), Float/Ints/Mask specs, or numpy arrays (see helpers.py).
Kinks and ties are checked with exact values in EXACT, following torch's conventions.
"""
import math

import numpy as np
import pytest

from helpers import F, Const, Float, Ints, Mask, check_exact, check_gradgrad, check_op


class Op:
    """One row of the table. `check` holds check_op options (low/high/away_from, out_dtype, tolerances, eps)."""

    def __init__(self, name, fn, np_fn, cases, *, int_cases=(), grad=True, gradgrad=False, noncontig=True,
                 torch=True, graph=True, **check):
        self.name, self.fn, self.np_fn, self.cases = name, fn, np_fn, list(cases)
        self.int_cases, self.grad, self.gradgrad = list(int_cases), grad, gradgrad
        self.noncontig, self.torch, self.graph, self.check = noncontig, torch, graph, check

    def __repr__(self):
        return self.name


# ---- numpy oracles ----

_erf = np.vectorize(math.erf, otypes=[np.float64])


def pos(*shape):
    return Float(shape, 0.5, 2.0)


def nonzero(*shape):
    return Float(shape, away_from=(0.0,), margin=0.4)


def np_remainder(a, b):
    """torch's remainder: fmod moved into the divisor's sign."""
    r = np.fmod(a, b)
    return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r)


def np_linear_recurrence(b, c, dim=1):
    """y_k = b_k + c_k y_{k-1} along dim."""
    y = np.zeros_like(b)
    prev = np.zeros_like(np.take(b, 0, dim))
    for k in range(b.shape[dim]):
        prev = np.take(b, k, dim) + np.take(c, k, dim) * prev
        y[(slice(None),) * dim + (k,)] = prev
    return y


def np_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def np_log_softmax(x, dim):
    s = x - x.max(axis=dim, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=dim, keepdims=True))


def np_logsumexp(x, dim, keepdim=False):
    mx = x.max(axis=dim, keepdims=True)
    r = mx + np.log(np.exp(x - mx).sum(axis=dim, keepdims=True))
    return r if keepdim else np.squeeze(r, axis=dim)


def np_cross_entropy(x, t, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    if x.ndim > 2:  # (N, C, d...) -> (N*d..., C)
        x = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
        shape, t = t.shape, t.reshape(-1)
    else:
        shape = t.shape
    logp = np_log_softmax(x, -1)
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    nll = -logp[np.arange(len(t)), safe]
    smooth = -logp.mean(axis=-1)
    losses = ((1 - label_smoothing) * nll + label_smoothing * smooth) * keep
    if reduction == "none":
        return losses.reshape(shape)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / keep.sum()


def np_rnn_layer(mode, reverse):
    """rnn_layer's oracle: mode 0 tanh, 1 relu, 2 LSTM (inputs gi, h0, c0, w[, b]), 3 GRU; out (S, L, N, H)."""
    def fn(gi, h0, *rest):
        c, (w, *b) = (rest[0], rest[1:]) if mode == 2 else (None, rest)
        b = b[0] if b else np.zeros(w.shape[0])
        L, H = gi.shape[0], h0.shape[1]
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        h, out = h0, np.zeros((2 if mode == 2 else 1,) + gi.shape[:2] + (H,))
        for t in (range(L - 1, -1, -1) if reverse else range(L)):
            gh = h @ w.T + b
            a = gi[t] + gh
            if mode == 2:
                c = sig(a[:, H:2 * H]) * c + sig(a[:, :H]) * np.tanh(a[:, 2 * H:3 * H])
                h = sig(a[:, 3 * H:]) * np.tanh(c)
                out[1, t] = c
            elif mode == 3:
                r, z = sig(a[:, :H]), sig(a[:, H:2 * H])
                n = np.tanh(gi[t][:, 2 * H:] + r * gh[:, 2 * H:])
                h = (1 - z) * n + z * h
            else:
                h = np.tanh(a) if mode == 0 else np.maximum(a, 0)
            out[0, t] = h
        return out
    return fn


def np_bce_logits(x, y, w=None, reduction="mean"):
    loss = np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x)))
    if w is not None:
        loss = loss * w
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def np_softplus(x, beta=1.0, threshold=20.0):
    return np.where(beta * x > threshold, x, np.log1p(np.exp(beta * x)) / beta)


def np_gelu(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def np_windows(x, kernel, stride, padding, fill):
    """(N, C, Ho, Wo, kh*kw): the pooling/conv windows of x, padded with `fill`."""
    (kh, kw), (sh, sw), (ph, pw) = pair(kernel), pair(stride), pair(padding)
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    ho, wo = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    return np.stack([x[:, :, i:i + sh * (ho - 1) + 1:sh, j:j + sw * (wo - 1) + 1:sw]
                     for i in range(kh) for j in range(kw)], axis=-1)


def np_conv2d(x, w, b=None, stride=1, padding=0):
    win = np_windows(x, w.shape[2:], stride, padding, 0.0)           # N, C, Ho, Wo, kh*kw
    out = np.einsum("nchwk,ock->nohw", win, w.reshape(w.shape[0], w.shape[1], -1))
    return out if b is None else out + b[None, :, None, None]


def np_sdpa(q, k, v, scale, causal):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return np.matmul(e / e.sum(-1, keepdims=True), v)


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    y = y if w is None else y * w
    return y if b is None else y + b


def np_setitem(x, idx, v):
    y = x.copy()
    y[idx] = v
    return y


def setitem(idx):
    def fn(m, x, v):
        y = x.clone()
        y[idx] = v
        return y
    return fn


def setitem_tensor_index(m, x, i, v):
    y = x.clone()
    y[i] = v
    return y


def inplace(method, *extra):
    """y = x.clone(); y.method(b, *extra): the in-place op is recorded on the clone's history."""
    def fn(m, x, *others):
        y = x.clone()
        getattr(y, method)(*others, *extra)
        return y
    return fn


def iop(op):
    def fn(m, x, b):
        y = x.clone()
        if op == "+":
            y += b
        elif op == "-":
            y -= b
        elif op == "*":
            y *= b
        else:
            y /= b
        return y
    return fn


# ---- shapes ----

UNARY = [[(3, 4)], [()], [(0, 3)], [(2, 3, 4)]]
BINARY = [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1)], [(), (3,)], [(), ()], [(0, 4), (4,)]]
REDUCE = [[(3, 4, 5)], [(5,)]]
INT_BINARY = [[Ints((3, 4), -5, 6), Ints((3, 4), -5, 6)], [Ints((3, 4), -5, 6), Ints((4,), -5, 6)]]
INT_UNARY = [[Ints((3, 4), -5, 6)]]
IMG = (2, 3, 6, 6)


def unary(name, np_fn, low=None, high=None, away_from=(), **kw):
    """A float unary op as a function and as a method: the same row checks both spellings."""
    return [Op(name, lambda m, x: getattr(m, name)(x), np_fn, UNARY, low=low, high=high, away_from=away_from, **kw),
            Op(name + "_method", lambda m, x: getattr(x, name)(), np_fn, UNARY[:1], low=low, high=high,
               away_from=away_from, graph=False, **kw)]


OPS = [
    # ---- arithmetic ----
    Op("add", lambda m, a, b: a + b, np.add, BINARY, int_cases=INT_BINARY, gradgrad=True),
    Op("add_fn_alpha", lambda m, a, b: m.add(a, b, alpha=2), lambda a, b: a + 2 * b, BINARY[:2]),
    Op("add_scalar", lambda m, a: a + 2.5, lambda a: a + 2.5, UNARY, int_cases=INT_UNARY),
    Op("radd_scalar", lambda m, a: 2 + a, lambda a: 2 + a, UNARY[:2]),
    Op("addcmul", lambda m, a, b, c: m.addcmul(a, b, c, value=0.5), lambda a, b, c: a + 0.5 * b * c,
       [[(2, 3), (2, 3), (3,)], [(), (4,), (2, 1)]], gradgrad=True),
    Op("sub", lambda m, a, b: a - b, np.subtract, BINARY, int_cases=INT_BINARY),
    Op("sub_fn_alpha", lambda m, a, b: m.sub(a, b, alpha=0.5), lambda a, b: a - 0.5 * b, BINARY[:2]),
    Op("rsub_scalar", lambda m, a: 1.5 - a, lambda a: 1.5 - a, UNARY[:2]),
    Op("mul", lambda m, a, b: a * b, np.multiply, BINARY, int_cases=INT_BINARY, gradgrad=True),
    Op("mul_fn", lambda m, a, b: m.mul(a, b), np.multiply, BINARY[:2]),
    Op("mul_scalar", lambda m, a: a * 0.5, lambda a: a * 0.5, UNARY, int_cases=INT_UNARY),
    Op("rmul_scalar", lambda m, a: 3 * a, lambda a: 3 * a, UNARY[:2]),
    Op("div", lambda m, a, b: a / b, np.divide,
       [[(3, 4), nonzero(3, 4)], [(3, 4), nonzero(4)], [(), nonzero(3)], [(0, 4), nonzero(4)]],
       int_cases=[[Ints((3, 4), -5, 6), Ints((3, 4), 1, 4)]], gradgrad=True),
    Op("div_scalar", lambda m, a: a / 4, lambda a: a / 4, UNARY),
    Op("rdiv_scalar", lambda m, a: 2 / a, lambda a: 2 / a, [[nonzero(3, 4)], [nonzero()]]),
    Op("neg", lambda m, a: -a, np.negative, UNARY, int_cases=INT_UNARY),
    Op("neg_fn", lambda m, a: m.neg(a), np.negative, UNARY[:1]),
    Op("pow", lambda m, a, b: a ** b, np.power, [[pos(3, 4), (3, 4)], [pos(3, 4), (4,)], [pos(), (3,)]],
       gradgrad=True),
    Op("pow_fn", lambda m, a, b: m.pow(a, b), np.power, [[pos(3, 4), (4,)]]),
    Op("pow_scalar2", lambda m, a: a ** 2, lambda a: a ** 2, UNARY, gradgrad=True),
    Op("pow_scalar3", lambda m, a: a ** 3, lambda a: a ** 3, UNARY[:2]),
    Op("pow_scalar_half", lambda m, a: a ** 0.5, np.sqrt, [[pos(3, 4)], [pos()]]),
    Op("pow_scalar_neg", lambda m, a: a ** -1.5, lambda a: a ** -1.5, [[pos(3, 4)]]),
    Op("rpow_scalar", lambda m, a: 2 ** a, lambda a: 2.0 ** a, UNARY[:2]),
    Op("matmul", lambda m, a, b: a @ b, np.matmul,
       [[(3, 4), (4, 5)], [(4,), (4,)], [(4,), (4, 5)], [(3, 4), (4,)], [(2, 3, 4), (4, 5)], [(2, 3, 4), (2, 4, 5)],
        [(2, 1, 3, 4), (3, 4, 2)], [(0, 4), (4, 3)], [(3, 0), (0, 2)], [(5,), (2, 5, 3)]], gradgrad=True),
    Op("matmul_fn", lambda m, a, b: m.matmul(a, b), np.matmul, [[(3, 4), (4, 5)]]),
    Op("mm", lambda m, a, b: m.mm(a, b), np.matmul, [[(3, 4), (4, 5)]], graph=False),
    Op("bmm", lambda m, a, b: m.bmm(a, b), np.matmul, [[(2, 3, 4), (2, 4, 5)]], graph=False),
    Op("maximum", lambda m, a, b: m.maximum(a, b), np.maximum, BINARY, int_cases=INT_BINARY[:1]),
    Op("minimum", lambda m, a, b: m.minimum(a, b), np.minimum, BINARY, int_cases=INT_BINARY[:1]),
    Op("max_binary", lambda m, a, b: m.max(a, b), np.maximum, BINARY[:2], graph=False),
    Op("where", lambda m, c, a, b: m.where(c, a, b), np.where,
       [[Mask((3, 4)), (3, 4), (3, 4)], [Mask((3, 1)), (4,), ()], [Mask(()), (3,), (3,)]], gradgrad=True,
       int_cases=[[Mask((3, 4)), Ints((3, 4), -5, 5), Ints((4,), -5, 5)]]),
    Op("where_method", lambda m, c, a, b: a.where(c, b), np.where, [[Mask((3, 4)), (3, 4), (4,)]]),
    Op("where_scalar", lambda m, c, a: m.where(c, a, 0.0), lambda c, a: np.where(c, a, 0.0),
       [[Mask((3, 4)), (3, 4)]]),
    Op("clamp", lambda m, a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), UNARY,
       away_from=(-0.5, 0.5), int_cases=[[Ints((3, 4), -5, 6)]]),
    Op("clamp_fn", lambda m, a: m.clamp(a, min=-0.5, max=0.5), lambda a: np.clip(a, -0.5, 0.5), UNARY[:1],
       away_from=(-0.5, 0.5)),
    Op("clamp_min", lambda m, a: a.clamp(min=0.2), lambda a: np.maximum(a, 0.2), UNARY[:1], away_from=(0.2,)),
    Op("clamp_max", lambda m, a: a.clamp(max=0.2), lambda a: np.minimum(a, 0.2), UNARY[:1], away_from=(0.2,)),
    Op("clip", lambda m, a: m.clip(a, -1.0, 1.0), lambda a: np.clip(a, -1, 1), UNARY[:1], away_from=(-1, 1)),
    Op("clamp_tensor", lambda m, a, lo, hi: m.clamp(a, lo, hi), lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
       [[(3, 4), Float((4,), -1.0, -0.2), Float((3, 1), 0.2, 1.0)]]),

    # ---- unary ----
    *unary("exp", np.exp, gradgrad=True),
    *unary("log", np.log, low=0.2, high=3.0, gradgrad=True),
    *unary("sqrt", np.sqrt, low=0.2, high=3.0),
    *unary("rsqrt", lambda a: 1 / np.sqrt(a), low=0.2, high=3.0),
    *unary("abs", np.abs, away_from=(0.0,)),
    *unary("sin", np.sin),
    *unary("cos", np.cos),
    *unary("tanh", np.tanh, gradgrad=True),
    *unary("sigmoid", lambda a: 1 / (1 + np.exp(-a)), gradgrad=True),
    *unary("relu", lambda a: np.maximum(a, 0), away_from=(0.0,)),
    *unary("erf", _erf),
    *unary("log1p", np.log1p, low=-0.8, high=2.0, gradgrad=True),
    *unary("expm1", np.expm1, gradgrad=True),
    *unary("log2", np.log2, low=0.2, high=3.0),
    *unary("log10", np.log10, low=0.2, high=3.0),
    *unary("tan", np.tan, low=-1.2, high=1.2, gradgrad=True),
    *unary("asin", np.arcsin, low=-0.9, high=0.9, gradgrad=True),
    *unary("acos", np.arccos, low=-0.9, high=0.9),
    *unary("atan", np.arctan, gradgrad=True),
    *unary("sinh", np.sinh, gradgrad=True),
    *unary("asinh", np.arcsinh, gradgrad=True),
    *unary("atanh", np.arctanh, low=-0.9, high=0.9, gradgrad=True),
    *unary("cosh", np.cosh, gradgrad=True),
    *unary("acosh", np.arccosh, low=1.1, high=3.0, gradgrad=True),
    Op("atan2", lambda m, a, b: m.atan2(a, b), np.arctan2, BINARY[:4], gradgrad=True),
    Op("remainder_prim", lambda m, a, b: m.remainder(a, b), np_remainder, [[(3, 4), nonzero(4)], [(3, 4), nonzero()]]),
    Op("fmod_prim", lambda m, a, b: m.fmod(a, b), np.fmod, [[(3, 4), nonzero(3, 4)]]),
    Op("abs_operator", lambda m, a: abs(a), np.abs, UNARY[:1], away_from=(0.0,)),
    Op("sign", lambda m, a: m.sign(a), np.sign, UNARY, away_from=(0.0,), int_cases=INT_UNARY),  # zero gradient
    Op("leaky_relu", lambda m, a: F(m).leaky_relu(a, 0.2), lambda a: np.where(a > 0, a, 0.2 * a), UNARY,
       away_from=(0.0,)),
    Op("leaky_relu_default", lambda m, a: F(m).leaky_relu(a), lambda a: np.where(a > 0, a, 0.01 * a), UNARY[:1],
       away_from=(0.0,)),
    Op("gelu", lambda m, a: F(m).gelu(a), np_gelu, UNARY, gradgrad=True),
    Op("softplus", lambda m, a: F(m).softplus(a), np_softplus, UNARY, gradgrad=True),
    Op("softplus_beta", lambda m, a: F(m).softplus(a, beta=2.0, threshold=1.0),
       lambda a: np_softplus(a, 2.0, 1.0), UNARY[:1], away_from=(0.5,)),
    Op("relu_F", lambda m, a: F(m).relu(a), lambda a: np.maximum(a, 0), UNARY[:1], away_from=(0.0,)),
    Op("sigmoid_F", lambda m, a: F(m).sigmoid(a), lambda a: 1 / (1 + np.exp(-a)), UNARY[:1]),
    Op("tanh_F", lambda m, a: F(m).tanh(a), np.tanh, UNARY[:1]),
    Op("exp_of_int", lambda m, a: m.exp(a), lambda a: np.exp(a), [], int_cases=[[Ints((3, 4), -3, 3)]],
       out_dtype="float32"),

    # ---- reductions ----
    Op("sum", lambda m, a: a.sum(), np.sum, REDUCE + [[()], [(0, 3)]], gradgrad=True,
       int_cases=INT_UNARY + [[Mask((3, 4))]]),
    Op("sum_dim", lambda m, a: a.sum(1), lambda a: a.sum(1), [[(3, 4, 5)], [(0, 3)], [(3, 0)]], int_cases=INT_UNARY),
    Op("sum_dim_neg_keepdim", lambda m, a: a.sum(dim=-1, keepdim=True), lambda a: a.sum(-1, keepdims=True),
       REDUCE),
    Op("sum_dims", lambda m, a: m.sum(a, dim=(0, 2)), lambda a: a.sum((0, 2)), [[(3, 4, 5)]]),
    Op("sum_dims_keepdim", lambda m, a: a.sum((0, 2), keepdim=True), lambda a: a.sum((0, 2), keepdims=True),
       [[(3, 4, 5)]]),
    Op("mean", lambda m, a: a.mean(), np.mean, REDUCE + [[()]], gradgrad=True),
    Op("mean_dim", lambda m, a: m.mean(a, 1, keepdim=True), lambda a: a.mean(1, keepdims=True), [[(3, 4, 5)]]),
    Op("mean_dims", lambda m, a: a.mean((-1, 0)), lambda a: a.mean((-1, 0)), [[(3, 4, 5)]]),
    Op("var", lambda m, a: a.var(), lambda a: np.var(a, ddof=1), REDUCE, gradgrad=True),
    Op("var_dim", lambda m, a: a.var(1), lambda a: np.var(a, axis=1, ddof=1), [[(3, 4, 5)]]),
    Op("var_correction0", lambda m, a: a.var(dim=(0, 2), correction=0, keepdim=True),
       lambda a: np.var(a, axis=(0, 2), keepdims=True), [[(3, 4, 5)]]),
    Op("var_unbiased_false", lambda m, a: m.var(a, 0, unbiased=False), lambda a: np.var(a, axis=0), [[(3, 4)]]),
    Op("std", lambda m, a: a.std(), lambda a: np.std(a, ddof=1), REDUCE),
    Op("std_dim", lambda m, a: a.std(dim=-1, keepdim=True), lambda a: np.std(a, -1, ddof=1, keepdims=True),
       [[(3, 4, 5)]]),
    Op("max", lambda m, a: a.max(), np.max, REDUCE + [[()]], int_cases=INT_UNARY),
    Op("max_dim", lambda m, a: a.max(dim=1), lambda a: (a.max(1), a.argmax(1)), [[(3, 4, 5)], [(4, 3)]],
       int_cases=INT_UNARY),
    Op("max_dim_keepdim", lambda m, a: m.max(a, -1, keepdim=True),
       lambda a: (a.max(-1, keepdims=True), a.argmax(-1)[..., None]), [[(3, 4, 5)]]),
    Op("min", lambda m, a: a.min(), np.min, REDUCE),
    Op("min_dim", lambda m, a: a.min(0), lambda a: (a.min(0), a.argmin(0)), [[(3, 4, 5)]]),
    Op("amax", lambda m, a: a.amax(), np.max, REDUCE),
    Op("amax_dims", lambda m, a: m.amax(a, dim=(0, 2)), lambda a: a.max((0, 2)), [[(3, 4, 5)]]),
    Op("amax_keepdim", lambda m, a: a.amax(1, keepdim=True), lambda a: a.max(1, keepdims=True), [[(3, 4, 5)]]),
    Op("amin", lambda m, a: a.amin(-1), lambda a: a.min(-1), [[(3, 4, 5)], [(5,)]]),
    Op("argmax", lambda m, a: a.argmax(), lambda a: np.argmax(a), REDUCE, grad=False, int_cases=INT_UNARY),
    Op("argmax_dim", lambda m, a: m.argmax(a, dim=1), lambda a: np.argmax(a, 1), [[(3, 4, 5)]], grad=False),
    Op("argmax_keepdim", lambda m, a: a.argmax(1, keepdim=True), lambda a: np.argmax(a, 1)[:, None], [[(3, 4)]],
       grad=False),
    Op("argmin", lambda m, a: a.argmin(0), lambda a: np.argmin(a, 0), [[(3, 4, 5)]], grad=False),
    Op("logsumexp", lambda m, a: a.logsumexp(1), lambda a: np_logsumexp(a, 1), [[(3, 4, 5)], [(3, 4)]],
       gradgrad=True),
    Op("cumsum", lambda m, a: a.cumsum(1), lambda a: np.cumsum(a, 1), [[(3, 4, 5)], [(3, 4)]], gradgrad=True,
       int_cases=INT_UNARY),
    Op("cumprod_prim", lambda m, a: a.cumprod(1), lambda a: np.cumprod(a, 1), [[(3, 4)]], gradgrad=True),
    Op("logcumsumexp_prim", lambda m, a: m.logcumsumexp(a, 0), lambda a: np.logaddexp.accumulate(a, 0), [[(4, 3)]],
       gradgrad=True),
    # the recurrence of cumprod's and logcumsumexp's derivatives (not a torch function)
    Op("linear_recurrence", lambda m, b, c: m._C.linear_recurrence(b, c, 1, False), np_linear_recurrence,
       [[(3, 4), (3, 4)]], gradgrad=True, graph=False, torch=False),
    Op("cumsum_dim0", lambda m, a: m.cumsum(a, dim=0), lambda a: np.cumsum(a, 0) if a.ndim else a.copy(),
       [[(3, 4)], [(5,)], [()]]),
    Op("logsumexp_dims", lambda m, a: m.logsumexp(a, dim=(0, 1), keepdim=True),
       lambda a: np_logsumexp(a, (0, 1), True), [[(3, 4, 5)]]),

    # ---- shape ----
    Op("reshape", lambda m, a: a.reshape(2, 6), lambda a: a.reshape(2, 6), [[(3, 4)]], int_cases=INT_UNARY),
    Op("reshape_infer", lambda m, a: a.reshape(-1), lambda a: a.reshape(-1), [[(3, 4)], [()], [(0, 3)]]),
    Op("reshape_tuple", lambda m, a: m.reshape(a, (2, -1, 2)), lambda a: a.reshape(2, -1, 2), [[(3, 4)]]),
    Op("reshape_0d", lambda m, a: a.reshape(1, 1), lambda a: a.reshape(1, 1), [[()]]),
    Op("reshape_empty", lambda m, a: a.reshape(3, 0), lambda a: a.reshape(3, 0), [[(0, 3)]]),
    Op("view", lambda m, a: a.view(4, 3), lambda a: a.reshape(4, 3), [[(3, 4)]], noncontig=False, graph=False),
    Op("view_infer", lambda m, a: a.view(-1, 2), lambda a: a.reshape(-1, 2), [[(3, 4)]], noncontig=False,
       graph=False),
    Op("flatten", lambda m, a: a.flatten(), lambda a: a.reshape(-1), [[(2, 3, 4)], [()]]),
    Op("flatten_from1", lambda m, a: m.flatten(a, 1), lambda a: a.reshape(a.shape[0], -1), [[(2, 3, 4)]]),
    Op("flatten_range", lambda m, a: a.flatten(0, 1), lambda a: a.reshape(-1, a.shape[-1]), [[(2, 3, 4)]]),
    Op("transpose", lambda m, a: a.transpose(0, 2), lambda a: np.swapaxes(a, 0, 2), [[(2, 3, 4)]],
       int_cases=[[Ints((2, 3, 4), 0, 9)]]),
    Op("transpose_fn", lambda m, a: m.transpose(a, -1, 0), lambda a: np.swapaxes(a, -1, 0), [[(3, 4)]]),
    Op("T", lambda m, a: a.T, lambda a: a.T, [[(3, 4)]]),
    Op("mT", lambda m, a: a.mT, lambda a: np.swapaxes(a, -1, -2), [[(2, 3, 4)]]),
    Op("permute", lambda m, a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [[(2, 3, 4)]]),
    Op("permute_fn", lambda m, a: m.permute(a, (1, 2, 0)), lambda a: a.transpose(1, 2, 0), [[(2, 3, 4)]]),
    Op("squeeze", lambda m, a: a.squeeze(), np.squeeze, [[(3, 1, 4, 1)], [(1,)]]),
    Op("squeeze_dim", lambda m, a: a.squeeze(1), lambda a: a.squeeze(1), [[(3, 1, 4)]]),
    Op("squeeze_noop", lambda m, a: m.squeeze(a, 0), lambda a: a, [[(3, 4)]]),
    Op("unsqueeze", lambda m, a: a.unsqueeze(0), lambda a: a[None], [[(3, 4)], [()]]),
    Op("unsqueeze_neg", lambda m, a: m.unsqueeze(a, -1), lambda a: a[..., None], [[(3, 4)]]),
    Op("expand", lambda m, a: a.expand(3, 4), lambda a: np.broadcast_to(a, (3, 4)), [[(3, 1)], [(4,)], [()]]),
    Op("expand_keep", lambda m, a: a.expand(2, -1, 4), lambda a: np.broadcast_to(a, (2, 3, 4)), [[(3, 1)]]),
    Op("expand_as", lambda m, a, b: a.expand_as(b), lambda a, b: np.broadcast_to(a, b.shape), [[(3, 1), (2, 3, 4)]],
       ),
    Op("cat", lambda m, a, b: m.cat([a, b]), lambda a, b: np.concatenate([a, b]),
       [[(3, 4), (2, 4)], [(0, 4), (2, 4)], [(3,), (1,)]], int_cases=[[Ints((2, 3), 0, 5), Ints((1, 3), 0, 5)]]),
    Op("cat_dim", lambda m, a, b, c: m.cat((a, b, c), dim=-1), lambda a, b, c: np.concatenate([a, b, c], -1),
       [[(3, 4), (3, 1), (3, 2)]], gradgrad=True),
    Op("stack", lambda m, a, b: m.stack([a, b]), lambda a, b: np.stack([a, b]), [[(3, 4), (3, 4)], [(), ()]]),
    Op("stack_dim", lambda m, a, b: m.stack([a, b], dim=-1), lambda a, b: np.stack([a, b], -1), [[(3, 4), (3, 4)]]),
    Op("split", lambda m, a: a.split(2, dim=1), lambda a: tuple(np.split(a, [2, 4], 1)), [[(3, 5)]]),
    Op("split_sizes", lambda m, a: m.split(a, [1, 3]), lambda a: tuple(np.split(a, [1])), [[(4, 2)]]),
    Op("chunk", lambda m, a: a.chunk(3, 1), lambda a: tuple(np.split(a, [2, 4], 1)), [[(3, 6)]]),
    Op("chunk_uneven", lambda m, a: m.chunk(a, 2), lambda a: tuple(np.split(a, [3])), [[(5, 2)]]),
    Op("unbind", lambda m, a: a.unbind(1), lambda a: tuple(a[:, i] for i in range(a.shape[1])), [[(3, 2)]]),
    Op("clone", lambda m, a: a.clone(), np.copy, UNARY, int_cases=INT_UNARY),
    # complex primitives from real (..., 2) data and back (tests/test_complex.py tests them on complex tensors)
    Op("view_as_complex_square", lambda m, a: m.view_as_real(m.view_as_complex(a) * m.view_as_complex(a)),
       lambda a: np.stack([a[..., 0] ** 2 - a[..., 1] ** 2, 2 * a[..., 0] * a[..., 1]], -1), [[(3, 2)], [(2, 4, 2)]],
       noncontig=False, torch=False, gradgrad=True),
    Op("conj_pairs", lambda m, a: m.view_as_real(m.conj(m.view_as_complex(a))),
       lambda a: np.stack([a[..., 0], -a[..., 1]], -1), [[(3, 2)]], noncontig=False, torch=False),
    Op("contiguous", lambda m, a: a.transpose(0, 1).contiguous(), lambda a: a.T.copy(), [[(3, 4)]]),
    Op("to_float64", lambda m, a: a.to(m.float64), lambda a: a, [[(3, 4)]], out_dtype="float64"),
    Op("double", lambda m, a: a.double(), lambda a: a, [[(3, 4)]], out_dtype="float64"),
    Op("float", lambda m, a: a.float() * 1.0, lambda a: a, [[(3, 4)]], out_dtype="float32", eps=1e-3,
       grad_tol=(1e-3, 1e-3)),
    Op("long", lambda m, a: a.long(), lambda a: a.astype(np.int64), [[Float((3, 4), -5, 5, step=1.0)]], grad=False,
       graph=False),

    # ---- indexing ----
    Op("getitem_int", lambda m, a: a[1], lambda a: a[1], [[(3, 4)], [(3,)]], int_cases=INT_UNARY),
    Op("getitem_neg_int", lambda m, a: a[-1, 2], lambda a: a[-1, 2], [[(3, 4)]]),
    Op("getitem_slice", lambda m, a: a[1:3], lambda a: a[1:3], [[(4, 3)]]),
    Op("getitem_slice_step", lambda m, a: a[::2, 1::2], lambda a: a[::2, 1::2], [[(5, 4)]]),
    Op("getitem_slice_empty", lambda m, a: a[2:2], lambda a: a[2:2], [[(4, 3)]]),
    Op("getitem_none", lambda m, a: a[None, :, None], lambda a: a[None, :, None], [[(3, 4)]]),
    Op("getitem_ellipsis", lambda m, a: a[..., 1], lambda a: a[..., 1], [[(2, 3, 4)]]),
    Op("getitem_list", lambda m, a: a[[0, 2, 2]], lambda a: a[[0, 2, 2]], [[(3, 4)]], gradgrad=True),
    Op("getitem_numpy", lambda m, a: a[np.array([[1, 0], [2, 2]])], lambda a: a[np.array([[1, 0], [2, 2]])],
       [[(3, 4)]]),
    Op("getitem_tensor", lambda m, a, i: a[i], lambda a, i: a[i], [[(3, 4), Ints((5,), 0, 3)],
                                                                 [(3, 4), Ints((2, 2), -3, 3)]],
       int_cases=[[Ints((3, 4), 0, 9), Ints((5,), 0, 3)]]),
    Op("getitem_two_lists", lambda m, a: a[[0, 1, 1], [3, 2, 3]], lambda a: a[[0, 1, 1], [3, 2, 3]], [[(3, 4)]]),
    Op("getitem_slice_list", lambda m, a: a[:, [0, 2, 0]], lambda a: a[:, [0, 2, 0]], [[(3, 4)]]),
    Op("getitem_mask", lambda m, a, k: a[k], lambda a, k: a[k], [[(3, 4), Mask((3, 4))], [(3, 4), Mask((3,))]],
       int_cases=[[Ints((3, 4), 0, 9), Mask((3, 4))]]),
    Op("getitem_mask_cmp", lambda m, a: a[a > 0], lambda a: a[a > 0], [[(3, 4)]]),
    Op("setitem_int", setitem(1), lambda x, v: np_setitem(x, 1, v), [[(3, 4), (4,)], [(3, 4), ()]]),
    Op("setitem_slice", setitem((slice(None), slice(1, 3))), lambda x, v: np_setitem(x, (slice(None), slice(1, 3)), v),
       [[(3, 4), (3, 2)], [(3, 4), (2,)]]),
    Op("setitem_list", setitem([0, 2]), lambda x, v: np_setitem(x, [0, 2], v), [[(3, 4), (2, 4)], [(3, 4), (4,)]]),
    Op("setitem_tensor", setitem_tensor_index, lambda x, i, v: np_setitem(x, i, v),
       [[(3, 4), np.array([2, 0]), (4,)]]),
    Op("setitem_mask", setitem_tensor_index, lambda x, k, v: np_setitem(x, k, v), [[(3, 4), Mask((3, 4)), ()]]),
    Op("gather", lambda m, a, i: a.gather(1, i), lambda a, i: np.take_along_axis(a, i, 1),
       [[(3, 4), Ints((3, 2), 0, 4)], [(3, 4), Ints((3, 6), 0, 4)]], gradgrad=True),
    Op("gather_dim0", lambda m, a, i: m.gather(a, 0, i), lambda a, i: np.take_along_axis(a, i, 0),
       [[(3, 4), Ints((2, 4), 0, 3)]], int_cases=[[Ints((3, 4), 0, 9), Ints((2, 4), 0, 3)]]),
    Op("index_select", lambda m, a, i: a.index_select(0, i), lambda a, i: a[i], [[(3, 4), Ints((5,), 0, 3)]],
       gradgrad=True),
    Op("index_select_dim1", lambda m, a, i: m.index_select(a, 1, i), lambda a, i: a[:, i],
       [[(3, 4), Ints((2,), 0, 4)], [(3, 4), Ints((0,), 0, 4)]]),
    Op("masked_fill", lambda m, a, k: a.masked_fill(k, 0.5), lambda a, k: np.where(k, 0.5, a),
       [[(3, 4), Mask((3, 4))], [(3, 4), Mask((4,))], [(), Mask(())]]),
    Op("masked_fill_int", lambda m, a, k: a.masked_fill(k, 7), lambda a, k: np.where(k, 7, a), [],
       int_cases=[[Ints((3, 4), 0, 9), Mask((3, 4))]]),
    Op("masked_fill_fn_tensor", lambda m, a, k, v: m.masked_fill(a, k, v), lambda a, k, v: np.where(k, v, a),
       [[(3, 4), Mask((3, 4)), ()]]),

    # ---- in-place ops (recorded on a clone's history) ----
    Op("iadd", iop("+"), np.add, [[(3, 4), (3, 4)], [(3, 4), (4,)]]),
    Op("isub", iop("-"), np.subtract, [[(3, 4), (4,)]]),
    Op("imul", iop("*"), np.multiply, [[(3, 4), (4,)]]),
    Op("idiv", iop("/"), np.divide, [[(3, 4), nonzero(4)]]),
    Op("add_", inplace("add_"), np.add, [[(3, 4), (4,)]]),
    Op("sub_", inplace("sub_"), np.subtract, [[(3, 4), (3, 4)]]),
    Op("mul_", inplace("mul_"), np.multiply, [[(3, 4), (3, 1)]]),
    Op("div_", inplace("div_"), np.divide, [[(3, 4), nonzero(3, 4)]]),
    Op("clamp_", inplace("clamp_", -0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), [[(3, 4)]], away_from=(-0.5, 0.5)),
    Op("zero_", inplace("zero_"), np.zeros_like, [[(3, 4)]]),
    Op("fill_", inplace("fill_", 2.0), lambda a: np.full_like(a, 2.0), [[(3, 4)]]),
    Op("copy_", inplace("copy_"), lambda a, b: np.broadcast_to(b, a.shape).copy(), [[(3, 4), (4,)]]),
    Op("masked_fill_", inplace("masked_fill_", -1.0), lambda a, k: np.where(k, -1.0, a), [[(3, 4), Mask((3, 4))]]),
    Op("inplace_on_view", lambda m, a, b: _inplace_on_view(a, b), lambda a, b: _np_inplace_on_view(a, b),
       [[(3, 4), (4,)]]),

    # ---- comparisons (bool results, no gradient) ----
    *[Op(name, fn, np_fn, [[(3, 4), (3, 4)], [(3, 4), (4,)],
                           [Float((3, 4), -2, 2, step=1.0), Float((4,), -2, 2, step=1.0)]],   # with ties
         grad=False, int_cases=INT_BINARY + [[Mask((3, 4)), Mask((3, 4))]])
      for name, fn, np_fn in [
          ("eq", lambda m, a, b: m.eq(a, b), np.equal), ("ne", lambda m, a, b: a.ne(b), np.not_equal),
          ("lt", lambda m, a, b: m.lt(a, b), np.less), ("le", lambda m, a, b: a.le(b), np.less_equal),
          ("gt", lambda m, a, b: m.gt(a, b), np.greater), ("ge", lambda m, a, b: a.ge(b), np.greater_equal),
          ("eq_op", lambda m, a, b: a == b, np.equal), ("ne_op", lambda m, a, b: a != b, np.not_equal),
          ("lt_op", lambda m, a, b: a < b, np.less), ("le_op", lambda m, a, b: a <= b, np.less_equal),
          ("gt_op", lambda m, a, b: a > b, np.greater), ("ge_op", lambda m, a, b: a >= b, np.greater_equal)]],
    Op("lt_scalar", lambda m, a: a < 0.5, lambda a: a < 0.5, UNARY, grad=False),
    Op("ge_scalar_int", lambda m, a: a >= 1, lambda a: a >= 1, [], grad=False, int_cases=INT_UNARY),

    # ---- nn ----
    Op("softmax", lambda m, a: F(m).softmax(a, dim=-1), lambda a: np_softmax(a, -1), [[(3, 4)], [(2, 3, 4)], [(5,)]],
       gradgrad=True),
    Op("softmax_dim0", lambda m, a: m.softmax(a, 0), lambda a: np_softmax(a, 0), [[(3, 4)]]),
    Op("softmax_method", lambda m, a: a.softmax(1), lambda a: np_softmax(a, 1), [[(2, 3, 4)]]),
    Op("log_softmax", lambda m, a: F(m).log_softmax(a, dim=1), lambda a: np_log_softmax(a, 1),
       [[(3, 4)], [(2, 3, 4)]], gradgrad=True),
    Op("log_softmax_method", lambda m, a: a.log_softmax(-1), lambda a: np_log_softmax(a, -1), [[(5,)]]),
    Op("cross_entropy", lambda m, x, t: F(m).cross_entropy(x, t), np_cross_entropy,
       [[(4, 5), Ints((4,), 0, 5)], [(1, 3), Ints((1,), 0, 3)]], gradgrad=True, graph=False),
    Op("cross_entropy_sum", lambda m, x, t: F(m).cross_entropy(x, t, reduction="sum"),
       lambda x, t: np_cross_entropy(x, t, "sum"), [[(4, 5), Ints((4,), 0, 5)]], graph=False),
    Op("cross_entropy_none", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"),
       lambda x, t: np_cross_entropy(x, t, "none"), [[(4, 5), Ints((4,), 0, 5)]], graph=False),
    Op("cross_entropy_ignore", lambda m, x, t: F(m).cross_entropy(x, t, ignore_index=-100),
       np_cross_entropy, [[(4, 5), np.array([1, -100, 4, 0])]], graph=False),
    Op("cross_entropy_smoothing", lambda m, x, t: F(m).cross_entropy(x, t, label_smoothing=0.1),
       lambda x, t: np_cross_entropy(x, t, label_smoothing=0.1), [[(4, 5), Ints((4,), 0, 5)]], graph=False),
    Op("cross_entropy_1d", lambda m, x, t: F(m).cross_entropy(x, t), lambda x, t: np_cross_entropy(x[None], t[None]),
       [[(5,), np.array(2)]], graph=False),
    Op("cross_entropy_spatial", lambda m, x, t: F(m).cross_entropy(x, t), np_cross_entropy,
       [[(2, 4, 3), Ints((2, 3), 0, 4)]], graph=False),
    Op("nll_loss", lambda m, x, t: F(m).nll_loss(F(m).log_softmax(x, dim=1), t),
       lambda x, t: np_cross_entropy(x, t), [[(4, 5), Ints((4,), 0, 5)]], graph=False),
    Op("nll_loss_sum", lambda m, x, t: F(m).nll_loss(x, t, reduction="sum"),
       lambda x, t: -x[np.arange(len(t)), t].sum(), [[(4, 5), Ints((4,), 0, 5)]], graph=False),
    Op("nll_loss_none", lambda m, x, t: F(m).nll_loss(x, t, reduction="none"),
       lambda x, t: -x[np.arange(len(t)), t], [[(4, 5), Ints((4,), 0, 5)]], graph=False),
    Op("mse_loss", lambda m, a, b: F(m).mse_loss(a, b), lambda a, b: ((a - b) ** 2).mean(), [[(3, 4), (3, 4)]],
       gradgrad=True),
    Op("mse_loss_sum", lambda m, a, b: F(m).mse_loss(a, b, reduction="sum"), lambda a, b: ((a - b) ** 2).sum(),
       [[(3, 4), (3, 4)]]),
    Op("mse_loss_none", lambda m, a, b: F(m).mse_loss(a, b, reduction="none"), lambda a, b: (a - b) ** 2,
       [[(3, 4), (3, 4)]]),
    Op("bce_with_logits", lambda m, x, y: F(m).binary_cross_entropy_with_logits(x, y), np_bce_logits,
       [[(3, 4), Float((3, 4), 0.0, 1.0)], [(5,), Float((5,), 0.0, 1.0)]], gradgrad=True),
    Op("bce_with_logits_weight", lambda m, x, y, w: F(m).binary_cross_entropy_with_logits(x, y, weight=w),
       np_bce_logits, [[(3, 4), Float((3, 4), 0.0, 1.0), Const(pos(4))]]),
    Op("bce_with_logits_sum", lambda m, x, y: F(m).binary_cross_entropy_with_logits(x, y, reduction="sum"),
       lambda x, y: np_bce_logits(x, y, reduction="sum"), [[Float((3, 4), -30, 30), Float((3, 4), 0.0, 1.0)]]),
    Op("linear", lambda m, x, w, b: F(m).linear(x, w, b), lambda x, w, b: x @ w.T + b,
       [[(3, 4), (5, 4), (5,)], [(2, 3, 4), (5, 4), (5,)], [(4,), (5, 4), (5,)]], graph=False),
    Op("linear_nobias", lambda m, x, w: F(m).linear(x, w), lambda x, w: x @ w.T, [[(3, 4), (2, 4)]], graph=False),
    Op("embedding", lambda m, i, w: F(m).embedding(i, w), lambda i, w: w[i],
       [[Ints((2, 3), 0, 6), (6, 4)], [Ints((5,), 0, 3), (3, 2)]], graph=False),
    Op("dropout_eval", lambda m, a: F(m).dropout(a, 0.5, training=False), lambda a: a, UNARY[:1], graph=False),
    Op("dropout_p0", lambda m, a: F(m).dropout(a, 0.0), lambda a: a, UNARY[:1], graph=False),
    Op("one_hot", lambda m, t: F(m).one_hot(t, 5), lambda t: np.eye(5, dtype=np.int64)[t], [], grad=False,
       int_cases=[[Ints((4,), 0, 5)], [Ints((2, 3), 0, 5)]]),
    Op("one_hot_infer", lambda m, t: F(m).one_hot(t), lambda t: np.eye(t.max() + 1, dtype=np.int64)[t], [],
       grad=False, int_cases=[[np.array([0, 3, 1])]]),
    Op("conv2d", lambda m, x, w, b: F(m).conv2d(x, w, b), np_conv2d, [[IMG, (4, 3, 3, 3), (4,)]], gradgrad=True,
       graph=False),
    Op("conv2d_nobias", lambda m, x, w: F(m).conv2d(x, w), np_conv2d, [[(1, 2, 5, 4), (3, 2, 2, 3)]], graph=False),
    Op("conv2d_stride_pad", lambda m, x, w, b: F(m).conv2d(x, w, b, stride=2, padding=1),
       lambda x, w, b: np_conv2d(x, w, b, 2, 1), [[IMG, (4, 3, 3, 3), (4,)], [(1, 2, 5, 5), (2, 2, 3, 3), (2,)]],
       graph=False),
    Op("conv2d_tuple_args", lambda m, x, w: F(m).conv2d(x, w, stride=(2, 1), padding=(0, 2)),
       lambda x, w: np_conv2d(x, w, None, (2, 1), (0, 2)), [[(1, 2, 5, 4), (3, 2, 2, 3)]], graph=False),
    Op("max_pool2d", lambda m, x: F(m).max_pool2d(x, 2), lambda x: np_windows(x, 2, 2, 0, -np.inf).max(-1),
       [[IMG], [(1, 1, 5, 5)]], graph=False),
    Op("max_pool2d_stride_pad", lambda m, x: F(m).max_pool2d(x, 3, stride=2, padding=1),
       lambda x: np_windows(x, 3, 2, 1, -np.inf).max(-1), [[IMG]], gradgrad=True, graph=False),
    Op("max_pool2d_rect", lambda m, x: F(m).max_pool2d(x, (2, 3), stride=(1, 2)),
       lambda x: np_windows(x, (2, 3), (1, 2), 0, -np.inf).max(-1), [[(1, 2, 4, 7)]], graph=False),
    Op("avg_pool2d", lambda m, x: F(m).avg_pool2d(x, 2), lambda x: np_windows(x, 2, 2, 0, 0.0).mean(-1),
       [[IMG]], gradgrad=True, graph=False),
    Op("avg_pool2d_stride_pad", lambda m, x: F(m).avg_pool2d(x, 3, stride=2, padding=1),
       lambda x: np_windows(x, 3, 2, 1, 0.0).mean(-1), [[IMG]], graph=False),
    Op("layer_norm", lambda m, x, w, b: F(m).layer_norm(x, (4,), w, b), lambda x, w, b: np_layer_norm(x, 1, w, b),
       [[(3, 4), (4,), (4,)]], gradgrad=True, graph=False),
    Op("layer_norm_2d", lambda m, x: F(m).layer_norm(x, (3, 4)), lambda x: np_layer_norm(x, 2),
       [[(2, 3, 4)]], graph=False),
    # the fused attention primitive (Note [Fused attention]); tests/test_attention.py has the rest
    Op("sdpa_fused", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, scale=0.4),
       lambda q, k, v: np_sdpa(q, k, v, 0.4, False), [[(2, 3, 4), (2, 5, 4), (2, 5, 3)]], gradgrad=True, graph=False),
    Op("sdpa_fused_causal", lambda m, q, k, v: F(m).scaled_dot_product_attention(q, k, v, is_causal=True),
       lambda q, k, v: np_sdpa(q, k, v, 0.5, True), [[(1, 2, 4, 4), (1, 2, 3, 4), (1, 2, 3, 2)]], graph=False),
    # the core's whole-sequence recurrent layer (Note [Whole-sequence RNN layer]); torch has no such function:
    # nn.RNN/LSTM/GRU, which use it, are compared with torch's in test_rnn.py
    Op("rnn_layer_lstm", lambda m, gi, h0, c0, w, b: m._C.rnn_layer(gi, h0, c0, w, b, 2, False),
       np_rnn_layer(2, False), [[(3, 2, 12), (2, 3), (2, 3), (12, 3), (12,)]], gradgrad=True, graph=False, torch=False),
    Op("rnn_layer_lstm_reverse_nobias", lambda m, gi, h0, c0, w: m._C.rnn_layer(gi, h0, c0, w, None, 2, True),
       np_rnn_layer(2, True), [[(4, 1, 8), (1, 2), (1, 2), (8, 2)]], graph=False, torch=False),
    Op("rnn_layer_gru", lambda m, gi, h0, w, b: m._C.rnn_layer(gi, h0, None, w, b, 3, False),
       np_rnn_layer(3, False), [[(3, 2, 9), (2, 3), (9, 3), (9,)]], gradgrad=True, graph=False, torch=False),
    Op("rnn_layer_gru_reverse", lambda m, gi, h0, w, b: m._C.rnn_layer(gi, h0, None, w, b, 3, True),
       np_rnn_layer(3, True), [[(2, 3, 6), (3, 2), (6, 2), (6,)]], graph=False, torch=False),
    Op("rnn_layer_tanh", lambda m, gi, h0, w, b: m._C.rnn_layer(gi, h0, None, w, b, 0, False),
       np_rnn_layer(0, False), [[(3, 2, 3), (2, 3), (3, 3), (3,)]], gradgrad=True, graph=False, torch=False),
    Op("rnn_layer_relu_reverse", lambda m, gi, h0, w, b: m._C.rnn_layer(gi, h0, None, w, b, 1, True),
       np_rnn_layer(1, True), [[Float((3, 2, 3), 0.2, 1.0), pos(2, 3), Float((3, 3), 0.0, 0.5), pos(3)]],
       graph=False, torch=False),
]


def _inplace_on_view(a, b):
    """Writes into a view of a non-leaf: the base's history must include the write (torch's CopySlices)."""
    y = a * 1
    y[1].mul_(b)
    return y


def _np_inplace_on_view(a, b):
    y = a.copy()
    y[1] *= b
    return y


OPS_BY_NAME = {op.name: op for op in OPS}
assert len(OPS_BY_NAME) == len(OPS), "duplicate op names in the table"

FLOAT_CASES = [pytest.param(op, i, id=f"{op.name}-{i}") for op in OPS for i in range(len(op.cases))]
INT_CASES = [pytest.param(op, i, id=f"{op.name}-int{i}") for op in OPS for i in range(len(op.int_cases))]
GRADGRAD = [pytest.param(op, id=op.name) for op in OPS if op.gradgrad]


@pytest.mark.parametrize("op,case", FLOAT_CASES)
def test_op(dg, op, case):
    check_op(dg, op.cases[case], op.fn, op.np_fn, name=op.name, grad=op.grad, noncontig=op.noncontig, **op.check)


@pytest.mark.parametrize("op,case", INT_CASES)
def test_op_int(dg, op, case):
    """int64/bool inputs: forward only; int and bool results exact, float results (int / int, int + 2.5, exp of an
    int...) float32 as in torch."""
    check_op(dg, op.int_cases[case], op.fn, op.np_fn, name=op.name, grad=False, dtypes=("float32",),
             out_dtype="float32", noncontig=False)


@pytest.mark.parametrize("op", GRADGRAD)
def test_second_derivatives(dg, op):
    check_gradgrad(dg, op.cases[0], op.fn, name=op.name, **{k: v for k, v in op.check.items()
                                                             if k in ("low", "high", "away_from")})


# ---- exact values at kinks and ties (torch's conventions; test_torch_oracle checks them against torch) ----

EXACT = [
    # name, fn, inputs, expected forward, expected gradients of fn(...).sum()
    ("relu_at_0", lambda m, x: x.relu(), [[-1.0, 0.0, 1.0]], [0.0, 0.0, 1.0], [[0.0, 0.0, 1.0]]),
    ("abs_at_0", lambda m, x: x.abs(), [[-2.0, 0.0, 3.0]], [2.0, 0.0, 3.0], [[-1.0, 0.0, 1.0]]),
    ("leaky_relu_at_0", lambda m, x: F(m).leaky_relu(x, 0.1), [[-1.0, 0.0, 1.0]], [-0.1, 0.0, 1.0],
     [[0.1, 0.1, 1.0]]),
    ("clamp_at_bounds", lambda m, x: x.clamp(-1.0, 1.0), [[-2.0, -1.0, 0.0, 1.0, 2.0]], [-1.0, -1.0, 0.0, 1.0, 1.0],
     [[0.0, 1.0, 1.0, 1.0, 0.0]]),
    ("clamp_min_at_bound", lambda m, x: x.clamp(min=0.0), [[-1.0, 0.0, 1.0]], [0.0, 0.0, 1.0], [[0.0, 1.0, 1.0]]),
    ("maximum_tie", lambda m, a, b: m.maximum(a, b), [[1.0, 2.0, 5.0], [1.0, 3.0, 4.0]], [1.0, 3.0, 5.0],
     [[0.5, 0.0, 1.0], [0.5, 1.0, 0.0]]),
    ("minimum_tie", lambda m, a, b: m.minimum(a, b), [[1.0, 2.0], [1.0, 3.0]], [1.0, 2.0], [[0.5, 1.0], [0.5, 0.0]]),
    ("max_all_ties", lambda m, x: x.max(), [[1.0, 3.0, 3.0]], 3.0, [[0.0, 0.5, 0.5]]),
    ("min_all_ties", lambda m, x: x.min(), [[2.0, 2.0, 3.0, 2.0]], 2.0, [[1 / 3, 1 / 3, 0.0, 1 / 3]]),
    ("amax_dim_ties", lambda m, x: x.amax(1), [[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]], [3.0, 2.0],
     [[[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]]),
    ("max_dim_ties_values", lambda m, x: x.max(1).values, [[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]], [3.0, 2.0],
     [[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]]),
    ("min_dim_ties_values", lambda m, x: x.min(0)[0], [[[1.0, 0.0], [1.0, 0.0]]], [1.0, 0.0],
     [[[1.0, 1.0], [0.0, 0.0]]]),
    ("argmax_ties_first", lambda m, x: x.argmax(1).double(), [[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]], [1.0, 0.0], None),
    ("max_dim_ties_indices", lambda m, x: x.max(1).indices.double(), [[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]],
     [1.0, 0.0], None),
    ("sign_at_0", lambda m, x: x.sign(), [[-2.0, 0.0, 3.0]], [-1.0, 0.0, 1.0], [[0.0, 0.0, 0.0]]),
    ("sqrt_at_0", lambda m, x: x.sqrt(), [[0.0, 4.0]], [0.0, 2.0], [[math.inf, 0.25]]),
    ("max_pool_ties", lambda m, x: F(m).max_pool2d(x, 2), [np.ones((1, 1, 2, 2))], [[[[1.0]]]],
     [[[[[1.0, 0.0], [0.0, 0.0]]]]]),
    ("relu_exact_grad_through_where", lambda m, x: m.where(x > 0, x, x * 0.0), [[-1.0, 0.0, 2.0]], [0.0, 0.0, 2.0],
     [[0.0, 0.0, 1.0]]),
    ("pow_0_to_2", lambda m, x: x ** 2, [[0.0, -1.0]], [0.0, 1.0], [[0.0, -2.0]]),
]


@pytest.mark.parametrize("case", EXACT, ids=[c[0] for c in EXACT])
def test_exact(dg, case):
    name, fn, vals, expect, expect_grad = case
    check_exact(dg, fn, vals, expect, expect_grad, name=name)


# ---- dropout: random, so checked by its statistics and determinism ----

def test_dropout_statistics(dg):
    dg.manual_seed(0)
    x = dg.ones(200, 100, dtype=dg.float64, requires_grad=True)
    y = F(dg).dropout(x, 0.3)
    kept = y.detach().numpy() != 0
    assert abs(kept.mean() - 0.7) < 0.01, kept.mean()                  # 20000 draws: sd of the mean ~0.003
    np.testing.assert_allclose(y.detach().numpy()[kept], 1 / 0.7)       # survivors are scaled by 1/(1-p)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())     # d(x*mask/(1-p))/dx = mask/(1-p)


def test_dropout_determinism(dg):
    x = dg.ones(50, dtype=dg.float64)
    dg.manual_seed(123)
    a = F(dg).dropout(x, 0.5).numpy()
    b = F(dg).dropout(x, 0.5).numpy()
    dg.manual_seed(123)
    c = F(dg).dropout(x, 0.5).numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b), "two draws after one seed should differ"


def test_dropout_edge_probabilities(dg):
    x = dg.tensor(np.arange(1.0, 7.0), requires_grad=True)
    np.testing.assert_array_equal(F(dg).dropout(x, 1.0).detach().numpy(), np.zeros(6))
    np.testing.assert_array_equal(F(dg).dropout(x, 0.9, training=False).detach().numpy(), np.arange(1.0, 7.0))
    assert F(dg).dropout(x, 0.2, training=False).requires_grad


def test_table_covers_issue_ops():
    """Every op named in issue 2 has at least one row (guards against a row being dropped by accident)."""
    required = """add sub mul div pow neg matmul maximum minimum where clamp exp log sqrt rsqrt abs sin cos tanh
        sigmoid relu leaky_relu gelu softplus sign sum mean var std max min amax amin argmax argmin logsumexp reshape
        view flatten transpose permute squeeze unsqueeze expand cat stack split chunk getitem_int getitem_slice
        getitem_none getitem_ellipsis getitem_tensor getitem_mask setitem_int gather index_select masked_fill eq ne lt
        le gt ge softmax log_softmax cross_entropy nll_loss mse_loss bce_with_logits linear embedding dropout_eval
        one_hot conv2d_stride_pad max_pool2d avg_pool2d layer_norm add_ sub_ mul_ div_ zero_ fill_ clamp_ iadd
        isub imul idiv""".split()
    missing = [n for n in required if n not in OPS_BY_NAME]
    assert not missing, missing
