"""Numerical robustness (docs/numerics.md): softmax, log_softmax, cross_entropy, sigmoid, softplus, logsumexp
(and tanh, gelu) stay finite and accurate for inputs up to |x| = 1e4 in float32, values and gradients; gradients
at kinks and ties (relu, abs, sign, leaky_relu, clamp, max/min/amax/amin, maximum/minimum, max_pool2d, where)
follow torch's conventions exactly. Expected values are float64 numpy formulas (stable ones) and, for kinks, the
numbers torch gives (written out, so that the tests run without torch; test_torch_agrees re-derives them).
"""
import math

import numpy as np
import pytest

BIG = [-1e4, -5e3, -100.0, -20.0, -1.0, 0.0, 1e-3, 1.0, 20.0, 100.0, 5e3, 1e4]


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def np_sigmoid(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


def np_softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def rows():
    """Rows of logits with |x| up to 1e4: huge gaps, huge equal values, mixed signs, one dominant entry."""
    return np.array([[1e4, -1e4, 0.0, 1e4 - 1.0],
                     [-1e4, -1e4, -1e4, -1e4 + 2.0],
                     [5e3, 5e3, 5e3, 5e3],
                     [1e4, 9999.5, -3.0, 2.0],
                     [0.1, -0.2, 0.3, 0.0]], dtype=np.float64)


def tensor32(dg, a, requires_grad=True):
    return dg.tensor(np.asarray(a, dtype=np.float32), requires_grad=requires_grad)


def as64(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def check(got, want, rtol, atol, what):
    assert np.isfinite(got).all(), f"{what}: not finite: {got}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


# float32 of the input, then float64 maths: the float32 result may differ only by float32 rounding
F32 = dict(rtol=2e-6, atol=1e-6)


def test_softmax_large_inputs(dg):
    x = rows()
    t = tensor32(dg, x)
    p = dg.softmax(t, 1)
    want = np.exp(np_log_softmax(x.astype(np.float32).astype(np.float64), 1))
    check(as64(p), want, what="softmax", **F32)
    w = np.arange(20, dtype=np.float64).reshape(5, 4) / 7
    (p * tensor32(dg, w, False)).sum().backward()
    wf = w.astype(np.float32)
    want_grad = want * (wf - (want * wf).sum(1, keepdims=True))
    check(as64(t.grad), want_grad, rtol=1e-5, atol=1e-5, what="softmax gradient")


def test_log_softmax_large_inputs(dg):
    x = rows().astype(np.float32).astype(np.float64)
    t = tensor32(dg, x)
    y = dg.log_softmax(t, 1)
    want = np_log_softmax(x, 1)
    # relative to the magnitude of the row: -2e4 is accurate to float32's 1e-3 absolute there
    check(as64(y), want, rtol=1e-6, atol=1e-5, what="log_softmax")
    y.sum().backward()
    want_grad = 1 - 4 * np.exp(want)
    check(as64(t.grad), want_grad, rtol=1e-5, atol=1e-5, what="log_softmax gradient")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_large_logits(dg, reduction):
    x = rows().astype(np.float32).astype(np.float64)
    target = np.array([1, 3, 0, 2, 0])
    t = tensor32(dg, x)
    loss = dg.cross_entropy(t, dg.tensor(target), reduction=reduction)
    logp = np_log_softmax(x, 1)
    per = -logp[np.arange(5), target]
    want = {"mean": per.mean(), "sum": per.sum(), "none": per}[reduction]
    check(as64(loss), want, rtol=1e-6, atol=1e-4, what=f"cross_entropy {reduction}")
    loss.sum().backward()
    onehot = np.eye(4)[target]
    scale = 1 / 5 if reduction == "mean" else 1.0
    check(as64(t.grad), (np.exp(logp) - onehot) * scale, rtol=1e-5, atol=1e-6, what="cross_entropy gradient")


def test_sigmoid_large_and_accurate(dg):
    x = np.array(BIG + list(np.linspace(-80, 80, 321)), dtype=np.float32).astype(np.float64)
    t = tensor32(dg, x)
    y = dg.sigmoid(t)
    want = np_sigmoid(x)
    got = as64(y)
    assert np.isfinite(got).all()
    # relative accuracy where float32 can represent the value normally, absolute below that
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-37)
    y.sum().backward()
    # y * (1 - y), as torch: for large x, 1 - y cancels, so the gradient is accurate in absolute terms (float32's
    # resolution near 1), e.g. 0 instead of 2e-9 at x = 20
    check(as64(t.grad), want * (1 - want), rtol=1e-5, atol=1e-7, what="sigmoid gradient")
    assert as64(y)[0] == 0.0 and as64(y)[len(BIG) - 1] == 1.0


def test_softplus_large_and_accurate(dg):
    x = np.array(BIG + list(np.linspace(-30, 30, 121)), dtype=np.float32).astype(np.float64)
    t = tensor32(dg, x)
    y = dg.softplus(t)
    want = np_softplus(x)
    np.testing.assert_allclose(as64(y), want, rtol=2e-6, atol=1e-37)
    y.sum().backward()
    # torch's rule: above the threshold (20) softplus is x, its gradient exactly 1
    want_grad = np.where(x > 20, 1.0, np_sigmoid(x))
    check(as64(t.grad), want_grad, rtol=1e-5, atol=1e-30, what="softplus gradient")


def test_logsumexp_large_inputs(dg):
    x = rows().astype(np.float32).astype(np.float64)
    t = tensor32(dg, x)
    y = dg.logsumexp(t, 1)
    m = x.max(1)
    want = m + np.log(np.exp(x - m[:, None]).sum(1))
    check(as64(y), want, rtol=1e-7, atol=1e-4, what="logsumexp")
    assert as64(y)[2] == np.float32(5e3 + math.log(4))
    y.sum().backward()
    # exp(x - y) with y rounded to float32 (as torch): at |y| = 1e4 that rounding (5e-4) is the gradient's error
    y32 = want.astype(np.float32).astype(np.float64)
    check(as64(t.grad), np.exp(x - y32[:, None]), rtol=1e-5, atol=1e-6, what="logsumexp gradient")


def test_logsumexp_infinities(dg):
    """logsumexp of all -inf is -inf (not NaN); +inf anywhere gives +inf."""
    t = dg.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [-math.inf, 0.0]])
    got = as64(dg.logsumexp(t, 1))
    assert got[0] == -math.inf and got[1] == math.inf and got[2] == 0.0


def test_tanh_gelu_exp_large_inputs(dg):
    x = np.array(BIG, dtype=np.float32).astype(np.float64)
    t = tensor32(dg, x)
    (dg.tanh(t) + dg.gelu(t)).sum().backward()
    assert np.isfinite(as64(t.grad)).all()
    np.testing.assert_allclose(as64(dg.tanh(t)), np.tanh(x), rtol=1e-6, atol=1e-7)
    big = tensor32(dg, [1e4, -1e4], False)
    assert as64(dg.exp(big)).tolist() == [math.inf, 0.0]


def test_float64_stays_accurate_far_out(dg):
    """float64 keeps going: sigmoid(-700) and softplus(-700) are ~1e-304, not 0 or NaN."""
    t = dg.tensor([-700.0, 700.0], dtype=dg.float64, requires_grad=True)
    s, sp = dg.sigmoid(t), dg.softplus(t)
    np.testing.assert_allclose(as64(s), np_sigmoid(np.array([-700.0, 700.0])), rtol=1e-12)
    np.testing.assert_allclose(as64(sp), np_softplus(np.array([-700.0, 700.0])), rtol=1e-12)
    (s + sp).sum().backward()
    assert np.isfinite(as64(t.grad)).all()


# ---- kinks and ties: torch's conventions (docs/numerics.md) ----

def grads(dg, fn, *values):
    leaves = [dg.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]
    fn(dg, *leaves).sum().backward()
    return [np.zeros(np.shape(v)) if t.grad is None else as64(t.grad) for t, v in zip(leaves, values)]


KINKS = [
    # name, fn, inputs, the gradients torch gives
    ("relu at 0", lambda m, x: m.relu(x), [[-1.0, 0.0, 1.0]], [[0.0, 0.0, 1.0]]),
    ("abs at 0", lambda m, x: x.abs(), [[-1.0, 0.0, 1.0]], [[-1.0, 0.0, 1.0]]),
    ("sign", lambda m, x: m.sign(x), [[-1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0]]),
    ("leaky_relu at 0", lambda m, x: m.leaky_relu(x, 0.1), [[-1.0, 0.0, 1.0]], [[0.1, 0.1, 1.0]]),
    ("clamp at both bounds", lambda m, x: x.clamp(-1.0, 1.0), [[-2.0, -1.0, 0.0, 1.0, 2.0]],
     [[0.0, 1.0, 1.0, 1.0, 0.0]]),
    ("clamp min at the bound", lambda m, x: x.clamp(min=0.0), [[-1.0, 0.0, 1.0]], [[0.0, 1.0, 1.0]]),
    ("max() ties share", lambda m, x: x.max(), [[1.0, 3.0, 3.0, 2.0]], [[0.0, 0.5, 0.5, 0.0]]),
    ("amax ties share", lambda m, x: x.amax(1), [[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]],
     [[[0.0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]]]),
    ("amin ties share", lambda m, x: m.amin(x, 0), [[1.0, 1.0, 4.0]], [[0.5, 0.5, 0.0]]),
    ("max(dim) ties: the returned index", lambda m, x: x.max(dim=1)[0], [[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]],
     [[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]]),
    ("min(dim) ties: the returned index", lambda m, x: x.min(dim=1)[0], [[[1.0, 1.0, 3.0], [2.0, 2.0, 2.0]]],
     [[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]]),
    ("maximum ties split", lambda m, a, b: m.maximum(a, b), [[1.0, 2.0, 3.0], [1.0, 1.0, 3.0]],
     [[0.5, 1.0, 0.5], [0.5, 0.0, 0.5]]),
    ("minimum ties split", lambda m, a, b: m.minimum(a, b), [[1.0, 2.0, 3.0], [1.0, 1.0, 3.0]],
     [[0.5, 0.0, 0.5], [0.5, 1.0, 0.5]]),
    ("max_pool2d ties: the first", lambda m, x: m.max_pool2d(x, 2), [[[[[1.0, 1.0], [1.0, 1.0]]]]],
     [[[[[1.0, 0.0], [0.0, 0.0]]]]]),
    ("where at the boundary", lambda m, a, b: m.where(a > 0, a, b), [[0.0, 1.0], [5.0, 5.0]],
     [[0.0, 1.0], [1.0, 0.0]]),
    ("x ** 2 at 0", lambda m, x: x ** 2, [[0.0]], [[0.0]]),
    ("x ** 0 at 0", lambda m, x: x ** 0.0, [[0.0]], [[0.0]]),
    ("std with no spread", lambda m, x: x.std(dim=1), [[[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]]],
     [[[0.0, 0.0, 0.0], [-0.5, 0.0, 0.5]]]),
]


@pytest.mark.parametrize("name, fn, values, expected", KINKS, ids=[k[0] for k in KINKS])
def test_kinks_and_ties_follow_torch(dg, name, fn, values, expected):
    for got, want in zip(grads(dg, fn, *values), expected):
        np.testing.assert_array_equal(got, np.asarray(want), err_msg=name)


@pytest.mark.parametrize("name, fn, values, expected", KINKS, ids=[k[0] for k in KINKS])
def test_torch_agrees(name, fn, values, expected):
    """The table above is torch's behaviour (checked whenever torch is installed)."""
    torch = pytest.importorskip("torch")

    class T:  # torch, with the nn functions at the top level as dyngrad has them
        def __getattr__(self, attr):
            return getattr(torch, attr, None) or getattr(torch.nn.functional, attr)
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    fn(T(), *leaves).sum().backward()
    for t, want in zip(leaves, expected):
        np.testing.assert_array_equal(t.grad.numpy(), np.asarray(want), err_msg=name)


# ---- second derivatives at kinks (issue 23): d/dx of the create_graph gradient, at and beside every kink ----
# torch's numbers, written out (test_torch_agrees_on_second_derivatives re-derives them). Every gradient must
# require grad under create_graph, the piecewise-linear ops' too (their second derivative is then 0, not an error).

def second_derivatives(m, fn, *values):
    leaves = [m.tensor(np.asarray(v, dtype=np.float64), requires_grad=True) for v in values]
    firsts = m.autograd.grad(fn(m, *leaves).sum(), leaves, create_graph=True)
    assert all(g.requires_grad for g in firsts), "a create_graph gradient does not require grad"
    seconds = m.autograd.grad(sum(g.sum() for g in firsts), leaves, allow_unused=True)
    return [np.zeros(np.shape(v)) if h is None else np.asarray(h.detach().numpy(), dtype=np.float64)
            for h, v in zip(seconds, values)]


def _nn(name):
    return lambda m: getattr(m.nn.functional, name)


SECOND_AT_KINKS = [
    # name, fn, inputs, torch's second derivatives
    ("huber_loss at 0 and delta", lambda m, x: _nn("huber_loss")(m)(x, x.detach() * 0, reduction="none"),
     [[-1.0, 0.0, 1.0, 2.0]], [[0.0, 1.0, 0.0, 0.0]]),
    ("huber_loss delta 2", lambda m, x: _nn("huber_loss")(m)(x, x.detach() * 0, reduction="none", delta=2.0),
     [[-2.0, 0.0, 1.0, 3.0]], [[0.0, 1.0, 1.0, 0.0]]),
    ("smooth_l1_loss at 0 and beta", lambda m, x: _nn("smooth_l1_loss")(m)(x, x.detach() * 0, reduction="none"),
     [[-1.0, 0.0, 1.0, 2.0]], [[0.0, 1.0, 0.0, 0.0]]),
    ("smooth_l1_loss beta 0.5 mean", lambda m, x: _nn("smooth_l1_loss")(m)(x, x.detach() * 0, beta=0.5),
     [[-0.5, 0.0, 0.25, 2.0]], [[0.0, 0.5, 0.5, 0.0]]),
    ("relu", lambda m, x: _nn("relu")(m)(x), [[-1.0, 0.0, 1.0]], [[0.0, 0.0, 0.0]]),
    ("relu squared", lambda m, x: _nn("relu")(m)(x) ** 2, [[-1.0, 0.0, 1.0]], [[0.0, 0.0, 2.0]]),
    ("relu6", lambda m, x: _nn("relu6")(m)(x), [[-1.0, 0.0, 3.0, 6.0, 7.0]], [[0.0] * 5]),
    ("hardtanh", lambda m, x: _nn("hardtanh")(m)(x), [[-2.0, -1.0, 0.0, 1.0, 2.0]], [[0.0] * 5]),
    ("leaky_relu", lambda m, x: _nn("leaky_relu")(m)(x, 0.1), [[-1.0, 0.0, 1.0]], [[0.0] * 3]),
    ("threshold", lambda m, x: _nn("threshold")(m)(x, 0.5, -2.0), [[0.0, 0.5, 1.0]], [[0.0] * 3]),
    ("hardshrink", lambda m, x: _nn("hardshrink")(m)(x), [[-1.0, -0.5, 0.0, 0.5, 1.0]], [[0.0] * 5]),
    ("softshrink", lambda m, x: _nn("softshrink")(m)(x), [[-1.0, -0.5, 0.0, 0.5, 1.0]], [[0.0] * 5]),
    ("abs times x", lambda m, x: x.abs() * x, [[-1.0, 0.0, 1.0]], [[-2.0, 0.0, 2.0]]),
    ("clamp times x", lambda m, x: x.clamp(-1.0, 1.0) * x, [[-2.0, -1.0, 0.0, 1.0, 2.0]],
     [[0.0, 2.0, 2.0, 2.0, 0.0]]),
    ("l1_loss times x", lambda m, x: _nn("l1_loss")(m)(x, x.detach() * 0, reduction="none") * x,
     [[-1.0, 0.0, 1.0]], [[-2.0, 0.0, 2.0]]),
    ("elu at 0", lambda m, x: _nn("elu")(m)(x), [[-1.0, 0.0, 1.0]], [[math.exp(-1.0), 0.0, 0.0]]),
    ("celu at 0", lambda m, x: _nn("celu")(m)(x, 2.0), [[-1.0, 0.0, 1.0]], [[math.exp(-0.5) / 2, 0.0, 0.0]]),
    ("max_pool2d squared", lambda m, x: _nn("max_pool2d")(m)(x, 2) ** 2, [[[[[1.0, 2.0], [3.0, -1.0]]]]],
     [[[[[0.0, 0.0], [2.0, 0.0]]]]]),
    ("max_pool2d kernel > input", lambda m, x: _nn("max_pool2d")(m)(x, 3, 2, 1), [[[[[1.0, 2.0], [3.0, -1.0]]]]],
     [[[[[0.0, 0.0], [0.0, 0.0]]]]]),
    ("avg_pool2d squared", lambda m, x: _nn("avg_pool2d")(m)(x, 2) ** 2, [[[[[1.0, 2.0], [3.0, -1.0]]]]],
     [[[[[0.5, 0.5], [0.5, 0.5]]]]]),
    ("adaptive_max_pool1d squared", lambda m, x: _nn("adaptive_max_pool1d")(m)(x, 1) ** 2, [[[[1.0, 2.0, 0.5]]]],
     [[[[0.0, 2.0, 0.0]]]]),
    ("reflect pad", lambda m, x: _nn("pad")(m)(x, (1, 1), mode="reflect"), [[[[1.0, 2.0, 3.0]]]], [[[[0.0] * 3]]]),
    ("replicate pad", lambda m, x: _nn("pad")(m)(x, (1, 1), mode="replicate"), [[[[1.0, 2.0, 3.0]]]],
     [[[[0.0] * 3]]]),
    ("conv1d with a constant weight", lambda m, x: _nn("conv1d")(m)(x, m.ones(1, 1, 2, dtype=m.float64)),
     [[[[1.0, -2.0, 3.0]]]], [[[[0.0] * 3]]]),
]


@pytest.mark.parametrize("name, fn, values, expected", SECOND_AT_KINKS, ids=[k[0] for k in SECOND_AT_KINKS])
def test_second_derivatives_at_kinks_follow_torch(dg, name, fn, values, expected):
    for got, want in zip(second_derivatives(dg, fn, *values), expected):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=0, err_msg=name)


@pytest.mark.parametrize("name, fn, values, expected", SECOND_AT_KINKS, ids=[k[0] for k in SECOND_AT_KINKS])
def test_torch_agrees_on_second_derivatives(name, fn, values, expected):
    torch = pytest.importorskip("torch")
    for got, want in zip(second_derivatives(torch, fn, *values), expected):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12, atol=0, err_msg=name)


# ---- NaN and inf through the elementwise activations and their gradients (issue 23), against torch ----

NONFINITE = [math.nan, math.inf, -math.inf, 0.0, -1.0, 2.0, 0.5]
ACTIVATIONS = ["relu", "relu6", "hardtanh", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish",
               "softplus", "softsign", "sigmoid", "tanh", "hardsigmoid", "hardswish", "logsigmoid", "softshrink",
               "hardshrink", "tanhshrink"]


UNARY = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "deg2rad", "digamma", "erf",
         "erfc", "erfinv", "exp", "exp2", "expm1", "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "logit",
         "neg", "rad2deg", "reciprocal", "round", "rsqrt", "sign", "sin", "sinc", "sinh", "sqrt", "square", "tan",
         "trunc", "nan_to_num", "i0", "positive"]
# positions of NONFINITE where torch's own answer depends on its kernel: float32 gelu(inf) is inf for one element
# and NaN (inf * 0 in its vectorised erf) for six
UNSPECIFIED = {("gelu", "value"): [1],
               # where torch's kernels give an artefact and dyngrad the mathematics: digamma's gradient at the pole -1
               # (torch: 1.3e15 in float32), i0(+-inf) (torch: NaN from its Chebyshev series; i0 grows to inf)
               ("digamma", "gradient"): [4], ("i0", "value"): [1, 2], ("i0", "gradient"): [1, 2]}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ACTIVATIONS + UNARY)
def test_nonfinite_values_and_gradients_follow_torch(dg, name, dtype):
    """softshrink(NaN) is NaN, float32 GELU's gradient at +-inf is NaN (inf * 0), ... as torch's."""
    torch = pytest.importorskip("torch")
    outs = {}
    for m in (dg, torch):
        x = m.tensor(NONFINITE, dtype=getattr(m, dtype), requires_grad=True)
        fn = getattr(m.nn.functional, name, None) if name in ACTIVATIONS else getattr(m, name)
        y = fn(x)
        y.backward(m.ones_like(y))
        grad = np.zeros(len(NONFINITE)) if x.grad is None else np.asarray(x.grad.numpy(), dtype=np.float64)
        outs[m] = (np.asarray(y.detach().numpy(), dtype=np.float64), grad)
    for got, want, what in zip(outs[dg], outs[torch], ("value", "gradient")):
        got, want = np.delete(got, UNSPECIFIED.get((name, what), [])), np.delete(want, UNSPECIFIED.get((name, what), []))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name} {what}: NaN positions")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {what}")


_SPECIAL_VALUES_SWEEP = r"""
import math, sys, warnings, importlib
dg = importlib.import_module(sys.argv[1])
x = dg.tensor([math.inf, -math.inf, math.nan, 0.0, 1.0, -1.0], requires_grad=True)
y = dg.tensor([math.inf, math.inf, 1.0, 0.0, math.inf, 0.0])
empty = dg.zeros(0, 3, requires_grad=True)
tried, warned = 0, []
for name in sorted(n for n in dir(dg) if not n.startswith("_")):
    fn = getattr(dg, name)
    if not callable(fn) or isinstance(fn, type) or name in ("meshgrid", "manual_seed", "seed", "load"):
        continue
    for args in ((x,), (x, y), (empty,)):
        try:
            out = fn(*args)
            if isinstance(out, dg.Tensor) and out.requires_grad and out.dtype.is_floating_point:
                out.sum().backward()
            tried += 1
        except RuntimeWarning as e:
            warned.append(f"{name}{tuple(tuple(a.shape) for a in args)}: {e}")
        except Exception:
            pass  # an op that refuses these arguments is checked elsewhere
print(tried)
print("\n".join(warned))
"""


def test_special_values_raise_no_numpy_warnings(dg):
    """torch computes inf - inf, 0 * inf, sin(inf), 1/0 and the reductions of empty tensors silently; numpy warns.
    Every public function of one or two tensor arguments, forward and backward, on inf/nan/0 operands and on
    empty tensors: no numpy RuntimeWarning may reach the user (Note [numpy's floating-point warnings]). Run as a
    user runs it, in a fresh interpreter with RuntimeWarnings as errors (`-W error::RuntimeWarning`): inside
    pytest, whose per-test warning capture drops filters installed by an import during another test, the
    engine's own filter would not be seen."""
    import subprocess
    import sys
    from helpers import subprocess_env
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", _SPECIAL_VALUES_SWEEP, dg.__name__],
                          capture_output=True, text=True, timeout=600, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    tried, *warned = proc.stdout.strip().split("\n")
    warned = [w for w in warned if w]
    assert not warned, "numpy warned in:\n" + "\n".join(warned)
    assert int(tried) > 200


def test_float32_sin_and_cos_are_accurate(dg):
    """The C++ engine computes float32 sin and cos with vectorisable polynomials for |x| <= 64 (fast_sinf in
    kernels/fast_math.h) and with std:: beyond: within 5 ulp of the float64 value over [-70, 70] (the fast range
    and its edge), correctly reduced for large arguments, -0.0, NaN and inf as torch gives them; strided inputs
    take the same paths."""
    xs = np.concatenate([np.linspace(-70, 70, 280001), np.geomspace(1e-30, 1.0, 2000), [0.0, 63.999996, 64.0,
                         64.000008, 1e4, 1e6, 3e38]]).astype(np.float32)
    xs = np.concatenate([xs, -xs])
    for name, exact_fn in (("sin", np.sin), ("cos", np.cos)):
        got = getattr(dg, name)(dg.tensor(xs)).numpy()
        exact = exact_fn(xs.astype(np.float64))
        ulps = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        assert ulps.max() <= 5, (name, xs[ulps.argmax()], got[ulps.argmax()], exact[ulps.argmax()])
        specials = getattr(dg, name)(dg.tensor([np.nan, np.inf, -np.inf], dtype=dg.float32)).numpy()
        assert np.isnan(specials).all(), (name, specials)
        grid = xs[:280000].reshape(700, 400)
        np.testing.assert_array_equal(getattr(dg, name)(dg.tensor(grid).T).numpy(), got[:280000].reshape(700, 400).T)
    assert np.signbit(dg.sin(dg.tensor([-0.0], dtype=dg.float32)).numpy()).all()


# name, call, the float64 function, the dense sweep's range, its edges (domain ends, the points where the kernels
# switch formulas, tiny, huge, infinities and NaN)
LIBM_POLYNOMIALS = [
    ("log1p", lambda m, x: m.log1p(x), np.log1p, (-1.0, 50.0), [-1.0, -0.9999999, -1.5, 1e-30, 1e-8, 3e38]),
    ("expm1", lambda m, x: m.expm1(x), np.expm1, (-30.0, 30.0), [-104.0, -1e-30, 1e-8, 19.999998, 20.0, 80.0, 88.5]),
    ("log2", lambda m, x: m.log2(x), np.log2, (0.0, 40.0), [1e-45, 1e-39, 1.17549435e-38, 0.70710677, 1.0, 8.0, 3e38,
                                                             -1.0]),
    ("log10", lambda m, x: m.log10(x), np.log10, (0.0, 40.0), [1e-45, 1e-39, 0.1, 1.0, 1000.0, 3e38, -1.0]),
    ("tan", lambda m, x: m.tan(x), np.tan, (-70.0, 70.0), [1.5707963, 63.999996, 64.0, 64.000008, 1e4]),
    ("asin", lambda m, x: m.asin(x), np.arcsin, (-1.0, 1.0), [0.5, 0.50000006, 0.99999994, 1.0, 1.0000001, 2.0]),
    ("acos", lambda m, x: m.acos(x), np.arccos, (-1.0, 1.0), [0.5, 0.50000006, -0.5, 0.99999994, 1.0, 2.0]),
    ("atan", lambda m, x: m.atan(x), np.arctan, (-30.0, 30.0), [0.41421354, 0.41421357, 2.4142134, 2.4142137, 3e38]),
    ("sinh", lambda m, x: m.sinh(x), np.sinh, (-89.0, 89.0), [0.99999994, 1.0, 9.0, 9.000001, 89.4, 90.0]),
]


@pytest.mark.parametrize("name,call,exact_fn,span,edges", LIBM_POLYNOMIALS, ids=[r[0] for r in LIBM_POLYNOMIALS])
def test_float32_libm_polynomials_are_accurate(dg, name, call, exact_fn, span, edges):
    """The C++ engine computes these float32 functions with vectorisable polynomials (Note [Vectorised float32
    libm] in kernels/fast_math.h, which states the measured errors, at most 2.75 ulp): within 4 ulp of the float64
    value over a dense sweep and at the edges; where the float64 value is NaN or infinite, the same; strided
    inputs take the same paths."""
    xs = np.concatenate([np.linspace(*span, 200001), np.geomspace(1e-30, 1.0, 2000), edges, [0.0, np.inf,
                         np.nan]]).astype(np.float32)
    xs = np.concatenate([xs, -xs])
    got = call(dg, dg.tensor(xs)).numpy().astype(np.float64)
    with np.errstate(all="ignore"):
        exact = exact_fn(xs.astype(np.float64))
    rounded = exact.astype(np.float32)
    special = ~np.isfinite(rounded)
    np.testing.assert_array_equal(got[special], rounded[special].astype(np.float64), err_msg=f"{name} at "
                                  f"{xs[special][got[special] != rounded[special]][:5]}")
    finite = ~special
    ulps = np.abs(got[finite] - exact[finite]) / np.spacing(np.abs(rounded[finite])).astype(np.float64)
    worst = ulps.argmax()
    assert ulps[worst] <= 4, (name, xs[finite][worst], got[finite][worst], exact[finite][worst], ulps[worst])
    grid = xs[:200000].reshape(500, 400)
    np.testing.assert_array_equal(call(dg, dg.tensor(grid).T).numpy(), got[:200000].reshape(500, 400).T)


def test_float32_atan2_is_accurate(dg):
    """float32 atan2 (fast_atan2f): within 4 ulp over a grid of signs and magnitudes; C's signed zeros and
    infinities (atan2(+-0, -0) = +-pi, atan2(+-inf, +-inf) = +-pi/4, +-3pi/4); NaN stays."""
    v = np.concatenate([np.sinh(np.linspace(-15, 15, 601)), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40,
                                                            3e38]]).astype(np.float32)
    a, b = (g.ravel() for g in np.meshgrid(v, v))
    got = dg.atan2(dg.tensor(a), dg.tensor(b)).numpy().astype(np.float64)
    exact = np.arctan2(a.astype(np.float64), b.astype(np.float64))
    nan = np.isnan(exact)
    assert np.isnan(got[nan]).all() and not np.isnan(got[~nan]).any()
    ulps = np.abs(got[~nan] - exact[~nan]) / np.spacing(np.abs(exact[~nan]).astype(np.float32)).astype(np.float64)
    worst = ulps.argmax()
    assert ulps[worst] <= 4, (a[~nan][worst], b[~nan][worst], got[~nan][worst], exact[~nan][worst])
    for x, y in ((0.0, -0.0), (-0.0, -0.0), (0.0, 0.0), (np.inf, -np.inf), (-np.inf, np.inf)):
        out = dg.atan2(dg.tensor([x], dtype=dg.float32), dg.tensor([y], dtype=dg.float32)).numpy()[0]
        assert out == np.float32(np.arctan2(np.float32(x), np.float32(y))), (x, y, out)


def test_float64_tanh_and_sigmoid_are_accurate(dg):
    """Note [float64 tanh and sigmoid] (kernels/fast_math.h): the C++ engine's vectorised float64 tanh and sigmoid
    (the ops, and the fused recurrent cells built on them) within 4 ulp of the exact values, across the switch
    between tanh's two formulas at |x| = 0.35, with signed zeros, infinities and NaN kept."""
    mp = pytest.importorskip("mpmath")
    mp.mp.prec = 100
    xs = np.concatenate([np.linspace(-25, 25, 20001), np.linspace(-0.7, 0.7, 4001), np.geomspace(1e-300, 1.0, 300),
                         [0.34999999999999998, 0.35, np.nextafter(0.35, 1), 18.5, 19.1, 354.0, 700.0]])
    xs = np.concatenate([xs, -xs])
    for name, fn, exact in (("tanh", dg.tanh, mp.tanh), ("sigmoid", dg.sigmoid, lambda v: 1 / (1 + mp.exp(-v)))):
        got = fn(dg.tensor(xs, dtype=dg.float64)).numpy()
        want = [exact(mp.mpf(float(v))) for v in xs]
        ulps = np.array([float(abs(mp.mpf(float(g)) - w)) for g, w in zip(got, want)]) / \
            np.spacing(np.abs(np.array([float(w) for w in want])))
        assert ulps.max() <= 4, (name, xs[ulps.argmax()], got[ulps.argmax()])
        special = fn(dg.tensor([0.0, -0.0, np.inf, -np.inf, np.nan, 800.0, -800.0], dtype=dg.float64)).numpy()
        if name == "tanh":
            np.testing.assert_array_equal(special, [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0])
            assert np.signbit(special[1]) and not np.signbit(special[0])
        else:
            np.testing.assert_array_equal(special, [0.5, 0.5, 1.0, 0.0, np.nan, 1.0, 0.0])


def test_float32_erf_and_gelu_are_accurate(dg):
    """The C++ engine computes float32 erf with its own vectorisable polynomials (fast_erff in
    kernels/elementwise.cpp): within 4 ulp of the exact value over [-6, 6], signs and NaN/inf kept; GELU and
    its gradient built on it within float32 rounding of the float64 ones."""
    xs = np.concatenate([np.linspace(-6, 6, 120001), np.geomspace(1e-30, 1.0, 3000), [0.0, -0.0, 0.9999999,
                         1.0, 1.0000001, 3.9999998, 4.0, np.inf, -np.inf]]).astype(np.float32)
    xs = np.concatenate([xs, -xs])
    got = dg.erf(dg.tensor(xs)).numpy()
    exact = np.array([math.erf(float(v)) for v in xs])
    ulps = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 4, (xs[ulps.argmax()], got[ulps.argmax()], exact[ulps.argmax()])
    assert np.isnan(dg.erf(dg.tensor([np.nan], dtype=dg.float32)).numpy()).all()
    assert np.signbit(dg.erf(dg.tensor([-0.0], dtype=dg.float32)).numpy()).all()
    x32 = dg.tensor(xs[np.abs(xs) < 10], requires_grad=True)
    x64 = dg.tensor(xs[np.abs(xs) < 10].astype(np.float64), requires_grad=True)
    for x in (x32, x64):
        dg.nn.functional.gelu(x).sum().backward()
    # x (1 + erf(x / sqrt 2)) / 2 cancels for x << 0 in float32 (torch's formula too): absolute tolerances
    np.testing.assert_allclose(dg.nn.functional.gelu(x32).detach().numpy(),
                               dg.nn.functional.gelu(x64).detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x32.grad.numpy(), x64.grad.numpy(), rtol=1e-6, atol=1e-6)
