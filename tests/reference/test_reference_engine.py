"""Tests of the pure-Python reference engine (dyngrad.reference): graph semantics and an op table checked
against numpy formulas (forward) and float64 central differences of those formulas (backward)."""
import gc
import importlib
import math
import re
import sys
import threading
import types

import numpy as np
import pytest


def _import_reference():
    """dyngrad/__init__.py imports the C++ extension; while it is not built, load the reference on its own."""
    try:
        return importlib.import_module("dyngrad.reference")
    except ImportError:
        for name in [m for m in sys.modules if m == "dyngrad" or m.startswith("dyngrad.")]:
            del sys.modules[name]
        import os
        stub = types.ModuleType("dyngrad")
        stub.__path__ = [os.path.join(os.path.dirname(__file__), "..", "..", "python", "dyngrad")]
        sys.modules["dyngrad"] = stub
        return importlib.import_module("dyngrad.reference")


dg = _import_reference()
errors = dg.errors


def t64(arr, requires_grad=True):
    return dg.tensor(np.asarray(arr, dtype=np.float64), requires_grad=requires_grad)


def numeric_grad(np_fn, arrays, weights, eps=1e-6):
    """Central differences of sum(np_fn(*arrays) * weights) with respect to every array (float64)."""
    grads = []
    for k, arr in enumerate(arrays):
        g = np.zeros_like(arr)
        for j in range(arr.size):
            idx = np.unravel_index(j, arr.shape)
            saved = arr[idx]
            arr[idx] = saved + eps
            plus = np.sum(np_fn(*arrays) * weights)
            arr[idx] = saved - eps
            minus = np.sum(np_fn(*arrays) * weights)
            arr[idx] = saved
            g[idx] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def _softmax(x, d):
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return e / e.sum(axis=d, keepdims=True)


def _log_softmax(x, d):
    return x - x.max(axis=d, keepdims=True) - np.log(np.exp(x - x.max(axis=d, keepdims=True)).sum(axis=d, keepdims=True))


_erf = np.vectorize(math.erf)


def _conv2d(x, w, b, stride=1, padding=0):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out + b.reshape(1, -1, 1, 1)


def _pool(x, k, stride, reduce):
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(x[:, :, i * stride:i * stride + k, j * stride:j * stride + k], axis=(2, 3))
    return out


def _layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


TARGETS = np.array([0, 2, 1, 2])
TARGETS_IGNORE = np.array([0, -100, 1, 2])

# name: (dg function, numpy function, input shapes, input generator ("normal", "positive", "distinct"))
OP_TABLE = {
    "add": (lambda a, b: a + b, np.add, [(3, 4), (4,)], "normal"),
    "add_alpha": (lambda a, b: dg.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, [(3, 1), (1, 4)], "normal"),
    "sub": (lambda a, b: a - b, np.subtract, [(2, 3), (2, 3)], "normal"),
    "rsub_scalar": (lambda a: 2.0 - a, lambda a: 2.0 - a, [(3,)], "normal"),
    "mul": (lambda a, b: a * b, np.multiply, [(3, 4), (3, 1)], "normal"),
    "mul_0d": (lambda a, b: a * b, np.multiply, [(), (2, 2)], "normal"),
    "div": (lambda a, b: a / b, np.divide, [(3, 4), (4,)], "positive"),
    "neg": (lambda a: -a, np.negative, [(5,)], "normal"),
    "pow": (lambda a, b: a ** b, np.power, [(3,), (3,)], "positive"),
    "pow_scalar": (lambda a: a ** 3, lambda a: a ** 3, [(2, 3)], "normal"),
    "rpow": (lambda a: 2.0 ** a, lambda a: 2.0 ** a, [(4,)], "normal"),
    "matmul_2d": (lambda a, b: a @ b, np.matmul, [(3, 4), (4, 2)], "normal"),
    "matmul_batched": (lambda a, b: a @ b, np.matmul, [(2, 3, 4), (4, 5)], "normal"),
    "matmul_vec_mat": (lambda a, b: a @ b, np.matmul, [(4,), (2, 4, 3)], "normal"),
    "matmul_mat_vec": (lambda a, b: a @ b, np.matmul, [(3, 4), (4,)], "normal"),
    "matmul_dot": (lambda a, b: a @ b, np.matmul, [(4,), (4,)], "normal"),
    "maximum": (dg.maximum, np.maximum, [(3, 4), (4,)], "distinct"),
    "minimum": (dg.minimum, np.minimum, [(3, 4), (3, 4)], "distinct"),
    "where": (lambda a, b: dg.where(a > 0, a, b), lambda a, b: np.where(a > 0, a, b), [(3, 4), (4,)], "distinct"),
    "clamp": (lambda a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), [(10,)], "distinct"),
    "exp": (dg.exp, np.exp, [(3, 2)], "normal"),
    "log": (dg.log, np.log, [(3, 2)], "positive"),
    "sqrt": (dg.sqrt, np.sqrt, [(4,)], "positive"),
    "rsqrt": (dg.rsqrt, lambda a: 1 / np.sqrt(a), [(4,)], "positive"),
    "abs": (dg.abs, np.abs, [(6,)], "distinct"),
    "sin": (dg.sin, np.sin, [(5,)], "normal"),
    "cos": (dg.cos, np.cos, [(5,)], "normal"),
    "tanh": (dg.tanh, np.tanh, [(5,)], "normal"),
    "sigmoid": (dg.sigmoid, lambda a: 1 / (1 + np.exp(-a)), [(5,)], "normal"),
    "relu": (dg.relu, lambda a: np.maximum(a, 0), [(6,)], "distinct"),
    "erf": (dg.erf, _erf, [(5,)], "normal"),
    "leaky_relu": (lambda a: dg.leaky_relu(a, 0.1), lambda a: np.where(a > 0, a, 0.1 * a), [(6,)], "distinct"),
    "gelu": (dg.gelu, lambda a: 0.5 * a * (1 + _erf(a / np.sqrt(2))), [(6,)], "normal"),
    "gelu_tanh": (lambda a: dg.gelu(a, approximate="tanh"),
                  lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))), [(6,)], "normal"),
    "softplus": (dg.softplus, lambda a: np.log1p(np.exp(a)), [(6,)], "normal"),
    "sum_all": (lambda a: a.sum(), np.sum, [(3, 4)], "normal"),
    "sum_dim_keepdim": (lambda a: a.sum(1, keepdim=True), lambda a: a.sum(1, keepdims=True), [(3, 4)], "normal"),
    "sum_dims": (lambda a: a.sum((0, 2)), lambda a: a.sum((0, 2)), [(2, 3, 4)], "normal"),
    "mean": (lambda a: a.mean(-1), lambda a: a.mean(-1), [(3, 4)], "normal"),
    "var": (lambda a: a.var(0), lambda a: a.var(0, ddof=1), [(4, 3)], "normal"),
    "var_biased": (lambda a: a.var(1, correction=0, keepdim=True), lambda a: a.var(1, keepdims=True), [(2, 5)],
                   "normal"),
    "std": (lambda a: a.std(), lambda a: a.std(ddof=1), [(3, 4)], "normal"),
    "amax": (lambda a: a.amax(1), lambda a: a.max(1), [(3, 4)], "distinct"),
    "amin": (lambda a: a.amin((0, 1)), lambda a: a.min((0, 1)), [(3, 4)], "distinct"),
    "max_dim": (lambda a: a.max(dim=0).values, lambda a: a.max(0), [(3, 4)], "distinct"),
    "min_dim_keepdim": (lambda a: a.min(1, keepdim=True)[0], lambda a: a.min(1, keepdims=True), [(3, 4)],
                        "distinct"),
    "max_all": (lambda a: a.max(), np.max, [(3, 4)], "distinct"),
    "logsumexp": (lambda a: a.logsumexp(1), lambda a: np.log(np.exp(a).sum(1)), [(3, 4)], "normal"),
    "reshape": (lambda a: a.reshape(4, -1) * 1.5, lambda a: a.reshape(4, -1) * 1.5, [(2, 6)], "normal"),
    "view_of_transpose": (lambda a: a.t().reshape(-1), lambda a: a.T.reshape(-1), [(3, 4)], "normal"),
    "transpose": (lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2), [(2, 3, 4)], "normal"),
    "permute": (lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [(2, 3, 4)], "normal"),
    "expand": (lambda a: a.expand(3, 2, 4), lambda a: np.broadcast_to(a, (3, 2, 4)), [(2, 1)], "normal"),
    "squeeze_unsqueeze": (lambda a: a.squeeze(1).unsqueeze(0), lambda a: a.squeeze(1)[None], [(3, 1, 2)], "normal"),
    "flatten": (lambda a: a.flatten(1), lambda a: a.reshape(2, -1), [(2, 3, 4)], "normal"),
    "cat": (lambda a, b: dg.cat([a, b], 1), lambda a, b: np.concatenate([a, b], 1), [(2, 3), (2, 1)], "normal"),
    "stack": (lambda a, b: dg.stack([a, b], 1), lambda a, b: np.stack([a, b], 1), [(2, 3), (2, 3)], "normal"),
    "split": (lambda a: a.split(2, 1)[1] * 2, lambda a: a[:, 2:4] * 2, [(3, 5)], "normal"),
    "chunk": (lambda a: a.chunk(3)[2], lambda a: a[4:], [(5, 2)], "normal"),
    "index_basic": (lambda a: a[1:, None, ::2, -1], lambda a: a[1:, None, ::2, -1], [(3, 5, 2)], "normal"),
    "index_ellipsis": (lambda a: a[..., 0], lambda a: a[..., 0], [(2, 3)], "normal"),
    "index_tensor_repeat": (lambda a: a[dg.tensor([0, 2, 0])], lambda a: a[[0, 2, 0]], [(3, 2)], "normal"),
    "index_mask": (lambda a: a[a > 0], lambda a: a[a > 0], [(3, 4)], "distinct"),
    "gather": (lambda a: a.gather(1, dg.tensor([[0, 0], [2, 1]])),
               lambda a: np.take_along_axis(a, np.array([[0, 0], [2, 1]]), 1), [(2, 3)], "normal"),
    "scatter_add": (lambda a, b: dg.scatter_add(a, 0, dg.tensor([[1, 0, 1]]), b),
                    lambda a, b: a + np.array([[0, b[0, 1], 0], [b[0, 0], 0, b[0, 2]]]), [(2, 3), (1, 3)], "normal"),
    "index_select": (lambda a: a.index_select(1, dg.tensor([2, 0])), lambda a: a[:, [2, 0]], [(2, 3)], "normal"),
    "masked_fill": (lambda a: a.masked_fill(a > 0, 0.5), lambda a: np.where(a > 0, 0.5, a), [(3, 4)], "distinct"),
    "softmax": (lambda a: dg.softmax(a, 1), lambda a: _softmax(a, 1), [(2, 5)], "normal"),
    "log_softmax": (lambda a: dg.log_softmax(a, -1), lambda a: _log_softmax(a, -1), [(3, 4)], "normal"),
    "cross_entropy": (lambda a: dg.cross_entropy(a, dg.tensor(TARGETS)),
                      lambda a: -_log_softmax(a, 1)[np.arange(4), TARGETS].mean(), [(4, 3)], "normal"),
    "cross_entropy_ignore_sum": (
        lambda a: dg.cross_entropy(a, dg.tensor(TARGETS_IGNORE), reduction="sum"),
        lambda a: -_log_softmax(a, 1)[[0, 2, 3], [0, 1, 2]].sum(), [(4, 3)], "normal"),
    "cross_entropy_none_ignore_mean": (
        lambda a: dg.cross_entropy(a, dg.tensor(TARGETS_IGNORE)),
        lambda a: -_log_softmax(a, 1)[[0, 2, 3], [0, 1, 2]].mean(), [(4, 3)], "normal"),
    "cross_entropy_spatial": (
        lambda a: dg.cross_entropy(a, dg.tensor([[0, 1], [1, 0]]), reduction="none"),
        lambda a: -np.take_along_axis(_log_softmax(a, 1), np.array([[0, 1], [1, 0]])[:, None], 1)[:, 0],
        [(2, 2, 2)], "normal"),
    "nll_loss": (lambda a: dg.nll_loss(a, dg.tensor(TARGETS)), lambda a: -a[np.arange(4), TARGETS].mean(), [(4, 3)],
                 "normal"),
    "bce_with_logits": (lambda a, b: dg.binary_cross_entropy_with_logits(a, b),
                        lambda a, b: np.mean(np.maximum(a, 0) - a * b + np.log1p(np.exp(-np.abs(a)))),
                        [(3, 2), (3, 2)], "normal"),
    "bce_pos_weight": (lambda a, b: dg.binary_cross_entropy_with_logits(a, b, pos_weight=dg.tensor([2.0, 0.5],
                                                                                                  dtype=dg.float64)),
                       lambda a, b: np.mean(-(np.array([2.0, 0.5]) * b * np.log(1 / (1 + np.exp(-a)))
                                              + (1 - b) * np.log(1 - 1 / (1 + np.exp(-a))))),
                       [(3, 2), (3, 2)], "normal"),
    "embedding": (lambda w: dg.embedding(dg.tensor([[0, 2], [2, 2]]), w), lambda w: w[[[0, 2], [2, 2]]], [(3, 2)],
                  "normal"),
    "conv2d": (lambda x, w, b: dg.conv2d(x, w, b, stride=2, padding=1), lambda x, w, b: _conv2d(x, w, b, 2, 1),
               [(2, 2, 5, 5), (3, 2, 3, 3), (3,)], "normal"),
    "max_pool2d": (lambda x: dg.max_pool2d(x, 2), lambda x: _pool(x, 2, 2, np.max), [(1, 2, 4, 4)], "distinct"),
    "avg_pool2d": (lambda x: dg.avg_pool2d(x, 3, 1), lambda x: _pool(x, 3, 1, np.mean), [(1, 2, 4, 5)], "normal"),
    "layer_norm": (lambda x, w, b: dg.layer_norm(x, (4,), w, b), _layer_norm, [(3, 4), (4,), (4,)], "normal"),
}


def _inputs(shapes, kind, rng):
    arrays = []
    for shape in shapes:
        if kind == "positive":
            arrays.append(rng.uniform(0.5, 2.0, size=shape))
        elif kind == "distinct":          # values away from kinks and ties
            n = int(np.prod(shape)) if shape else 1
            values = (rng.permutation(n) - n / 2 + 0.37) * 0.25
            arrays.append(values.reshape(shape))
        else:
            arrays.append(rng.standard_normal(shape))
    return arrays


@pytest.mark.parametrize("name", list(OP_TABLE))
def test_op_forward_and_backward_match_numpy(name):
    fn, np_fn, shapes, kind = OP_TABLE[name]
    rng = np.random.default_rng(abs(hash(name)) % 2 ** 32)
    arrays = _inputs(shapes, kind, rng)
    if name.startswith("bce"):
        arrays[1] = rng.uniform(0, 1, size=shapes[1])
    tensors = [t64(a) for a in arrays]
    out = fn(*tensors)
    expected = np_fn(*[a.copy() for a in arrays])
    assert out.shape == np.shape(expected), name
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-7, atol=1e-9, err_msg=name)
    weights = rng.standard_normal(np.shape(expected))
    (out * t64(weights, requires_grad=False)).sum().backward()
    numeric = numeric_grad(np_fn, arrays, weights)
    for i, (t, g) in enumerate(zip(tensors, numeric)):
        assert t.grad is not None, f"{name}: no gradient for input {i}"
        assert t.grad.shape == t.shape and t.grad.dtype is dg.float64
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-5, atol=1e-6, err_msg=f"{name}: input {i}")


SECOND_ORDER = ["mul", "div", "pow", "matmul_batched", "exp", "log", "tanh", "sigmoid", "erf", "gelu", "softplus",
                "var", "std", "logsumexp", "softmax", "log_softmax", "cross_entropy", "bce_with_logits", "conv2d",
                "layer_norm", "max_pool2d", "avg_pool2d", "index_tensor_repeat", "gather", "sqrt", "rsqrt"]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_gradgradcheck(name):
    fn, _, shapes, kind = OP_TABLE[name]
    rng = np.random.default_rng(1)
    arrays = _inputs(shapes, kind, rng)
    if name.startswith("bce"):
        arrays[1] = rng.uniform(0, 1, size=shapes[1])
    assert dg.autograd.gradgradcheck(fn, [t64(a) for a in arrays], atol=1e-4)


# ===== engine semantics =========================================================================================

def test_diamond_and_reused_subexpression():
    x = t64([1.0, -2.0, 3.0])
    y = x * x + x                       # x used three times
    z = y * y + y                       # y used three times
    z.sum().backward()
    xv = np.array([1.0, -2.0, 3.0])
    yv = xv * xv + xv
    np.testing.assert_allclose(x.grad.numpy(), (2 * yv + 1) * (2 * xv + 1))
    assert z.grad_fn.name() == "AddBackward"
    mul_node = z.grad_fn.next_functions[0][0]
    assert mul_node.name() == "MulBackward"
    leaf_sink = y.grad_fn.next_functions[1][0]
    assert leaf_sink.name() == "AccumulateGrad" and leaf_sink.variable is x


def test_grad_accumulates_over_two_backward_calls():
    x = t64([2.0])
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0 + 4.0])


# 100,000 ops (well past any recursion limit, and past the depth where a recursive free of the chain would
# overflow the C stack) run by default; the 1,000,000-op versions run with --runslow.
CHAIN_LENGTHS = [100_000, pytest.param(1_000_000, marks=pytest.mark.slow)]


@pytest.mark.parametrize("n", CHAIN_LENGTHS)
def test_deep_chain_backpropagates(n):
    # The cyclic GC would rescan the millions of live graph objects while they are built; the engine makes no
    # reference cycles (saved outputs hold no Tensor), so plain reference counting frees the chain.
    gc.disable()
    try:
        x = dg.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(n):
            y = y + 1.0
        y.backward()
        assert x.grad.item() == 1.0
        del y                           # freeing the (released) chain must not overflow the C stack
    finally:
        gc.enable()


@pytest.mark.parametrize("n", CHAIN_LENGTHS)
def test_deep_chain_is_freed_without_backward(n):
    gc.disable()
    try:
        x = dg.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(n):
            y = y * 1.0
        del y                           # drop the whole un-backpropagated graph at once
    finally:
        gc.enable()
    assert x.grad is None


def test_backward_twice_needs_retain_graph():
    x = t64([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    xv = np.array([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.exp(xv) * (xv + 1)))
    with pytest.raises(RuntimeError, match=re.escape(errors.ERR_BACKWARD_TWICE.format(node="MulBackward"))):
        y.backward()


def test_second_derivative_of_cube_is_6x():
    x = t64([0.5, -1.0, 2.0])
    y = (x * x * x).sum()
    (g,) = dg.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, -1.0, 2.0]) ** 2)
    (h,) = dg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, -1.0, 2.0]))
    z = dg.tensor(1.5, dtype=dg.float64, requires_grad=True)
    (gz,) = dg.autograd.grad(z ** 3, z, create_graph=True)
    gz.backward()
    assert z.grad.item() == pytest.approx(9.0)


def test_hessian_vector_product():
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    x = t64([1.0, -1.0])
    f = 0.5 * (x @ t64(a, False) @ x)
    (g,) = dg.autograd.grad(f, x, create_graph=True)
    v = t64([1.0, 2.0], False)
    (hv,) = dg.autograd.grad((g * v).sum(), x)
    np.testing.assert_allclose(hv.numpy(), a @ np.array([1.0, 2.0]))


def test_grad_does_not_touch_dot_grad_and_allow_unused():
    x, w = t64([1.0, 2.0]), t64([3.0, 4.0])
    unused = t64([0.0])
    y = (x * w).sum()
    gx, gu = dg.autograd.grad(y, [x, unused], retain_graph=True, allow_unused=True)
    np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
    assert gu is None and x.grad is None and w.grad is None
    with pytest.raises(RuntimeError, match="allow_unused"):
        dg.autograd.grad(y, [x, unused], retain_graph=True)
    y.backward(inputs=[w])
    assert x.grad is None
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 2.0])


def test_hooks_can_replace_the_gradient_and_be_removed():
    x = t64([1.0, 2.0])
    seen = []
    h = x * 2
    handle = h.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    h.retain_grad()
    (h * h).sum().backward(retain_graph=True)
    np.testing.assert_allclose(h.grad.numpy(), [40.0, 80.0])          # retain_grad sees the hooked value
    np.testing.assert_allclose(x.grad.numpy(), [80.0, 160.0])
    np.testing.assert_allclose(seen[0], [80.0, 160.0])
    handle.remove()
    x.grad = None
    (h * h).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [8.0, 16.0])


def test_custom_function():
    class MyExp(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, scale):
            out = (a * scale).exp()
            ctx.save_for_backward(out)
            ctx.scale = scale
            return out

        @staticmethod
        def backward(ctx, grad):
            (out,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return grad * out * ctx.scale, None

    x = t64([0.0, 1.0])
    y = MyExp.apply(x, 2.0)
    assert y.grad_fn.name() == "MyExpBackward"
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(4 * np.array([0.0, 1.0])) * 2)
    assert dg.autograd.gradcheck(lambda a: MyExp.apply(a, 2.0), [t64([0.3, -0.2])])
    assert dg.autograd.gradgradcheck(lambda a: MyExp.apply(a, 2.0), [t64([0.3, -0.2])])

    class Wrong(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match=r"Wrong.backward returned 1 gradient, but forward had 2 inputs."):
        Wrong.apply(t64([1.0]), t64([2.0])).sum().backward()


def test_inplace_on_saved_tensor_is_detected():
    x = t64([1.0, 2.0])
    h = x * 2
    y = h * h
    h.add_(1)
    message = errors.ERR_SAVED_MODIFIED.format(shape="(2,)", node="MulBackward", now=1, saved=0)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        y.sum().backward()


def test_inplace_on_leaf_requiring_grad_is_an_error():
    x = t64([1.0])
    with pytest.raises(RuntimeError, match=re.escape(errors.ERR_LEAF_INPLACE.format(op="add_"))):
        x += 1
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x[0] = 3.0
    with dg.no_grad():
        x.mul_(2)
    assert x.item() == 2.0 and x._version == 1


def test_inplace_ops_are_recorded_and_move_grad_fn():
    x = t64([1.0, 2.0, 3.0])
    h = x * 2
    h.mul_(3)
    assert h.grad_fn.name() == "MulBackward" and h._version == 1
    h[0] = 0.0
    assert h.grad_fn.name() == "PutBackward"          # setitem is put(), as in the C++ engine
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 6.0, 6.0])


def test_inplace_on_a_view_rewrites_the_base_history():
    x = t64([1.0, 2.0, 3.0, 4.0])
    base = x * 1
    view = base[1:3]
    view.mul_(x[:2])                    # base[1:3] *= x[:2]
    assert base._version == view._version == 1
    np.testing.assert_allclose(base.detach().numpy(), [1.0, 2.0, 6.0, 4.0])
    base.sum().backward()
    # d/dx of x0 + x1*x0 + x2*x1 + x3
    np.testing.assert_allclose(x.grad.numpy(), [1.0 + 2.0, 1.0 + 3.0, 2.0, 1.0])


def test_views_share_memory_and_version_counter():
    a = dg.arange(6.0).reshape(2, 3)
    for v in (a.t(), a[0], a.view(6), a.unsqueeze(0), a.permute(1, 0), a[:, ::2]):
        assert np.shares_memory(v.numpy(), a.numpy())
    v = a[1]
    v.add_(10)
    assert a._version == v._version == 1 and a[1, 0].item() == 13.0
    arr = np.zeros(3, dtype=np.float32)
    t = dg.from_numpy(arr)
    t[1] = 5
    assert arr[1] == 5.0 and not a.t().is_contiguous()
    assert a.expand(3, 2, 3).stride() == (0, 3, 1)


def test_no_grad_is_thread_local_and_decorates():
    results = {}

    def worker():
        with dg.no_grad():
            results["worker"] = dg.is_grad_enabled()
            barrier.wait()
            barrier.wait()

    barrier = threading.Barrier(2)
    thread = threading.Thread(target=worker)
    thread.start()
    barrier.wait()
    results["main"] = dg.is_grad_enabled()
    barrier.wait()
    thread.join()
    assert results == {"worker": False, "main": True}

    @dg.no_grad()
    def f(x):
        return x * 2

    @dg.no_grad
    def g(x):
        return x * 2

    x = t64([1.0])
    assert not f(x).requires_grad and not g(x).requires_grad and (x * 2).requires_grad
    with dg.no_grad():
        with dg.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    dg.set_grad_enabled(False)
    assert not dg.is_grad_enabled()
    dg.set_grad_enabled(True)
    with dg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert dg.is_grad_enabled()


def test_threads_run_independent_backward_passes():
    out = {}

    def work(i):
        x = t64([float(i)])
        for _ in range(200):
            y = (x * x).sum()
            (g,) = dg.autograd.grad(y, x)
        out[i] = g.item()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {i: 2.0 * i for i in range(4)}


def test_shared_error_messages():
    a, b = dg.ones(3, 4), dg.ones(5)
    with pytest.raises(RuntimeError, match=re.escape(errors.ERR_BROADCAST.format(
            op="mul", a="(3, 4)", b="(5,)", d=-1, x=4, y=5))):
        a * b
    with pytest.raises(RuntimeError, match=re.escape("matmul: inner dimensions do not match: (3, 4) @ (5,) (4 != 5).")):
        a @ b
    with pytest.raises(RuntimeError, match=re.escape("reshape: shape (5,) is invalid for a tensor of 12 elements")):
        a.reshape(5)
    with pytest.raises(RuntimeError, match=r"view: cannot view a tensor of shape \(4, 3\)"):
        a.t().view(12)
    with pytest.raises(IndexError, match=re.escape("sum: dim 2 is out of range for a tensor of 2 dimensions "
                                                   "(expected -2..1).")):
        a.sum(2)
    with pytest.raises(IndexError, match=re.escape("index 3 is out of range for dimension 0 of size 3.")):
        a[3]
    with pytest.raises(IndexError, match=re.escape("index 7 is out of range for dimension 1 of size 4.")):
        a[:, dg.tensor([0, 7])]
    with pytest.raises(IndexError, match="int64 or bool"):
        a[dg.tensor([0.0])]
    with pytest.raises(RuntimeError, match=re.escape(errors.ERR_NONSCALAR_BACKWARD.format(shape="(3, 4)"))):
        (a.requires_grad_() * 2).backward()
    with pytest.raises(RuntimeError, match=re.escape(errors.ERR_NO_GRAD_FN)):
        dg.ones(2).sum().backward()
    with pytest.raises(RuntimeError, match=re.escape(errors.ERR_INT_REQUIRES_GRAD.format(dtype="int64"))):
        dg.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError):        # NotImplemented, then str * tensor asks for an index (as the C++ engine)
        dg.ones(2) * "x"
    with pytest.raises(TypeError, match="mul"):
        dg.mul(dg.ones(2), "x")
    with pytest.raises(IndexError, match="cross_entropy: target 5 is out of range for 3 classes"):
        dg.cross_entropy(dg.ones(2, 3), dg.tensor([0, 5]))
    with pytest.raises(RuntimeError, match=r"conv2d: input has 2 channels but the weight expects 3"):
        dg.conv2d(dg.ones(1, 2, 5, 5), dg.ones(4, 3, 3, 3))


def test_dtypes_and_promotion():
    assert str(dg.float32) == "dyngrad.float32" and dg.get_default_dtype() is dg.float32
    assert dg.tensor([1.0]).dtype is dg.float32 and dg.tensor([1]).dtype is dg.int64
    assert dg.tensor([True]).dtype is dg.bool and dg.tensor(np.ones(2)).dtype is dg.float64
    assert dg.zeros(2, dtype=float).dtype is dg.float64 and dg.zeros(2, dtype=np.float32).dtype is dg.float32
    f32, f64, i64 = dg.ones(2), dg.ones(2, dtype=dg.float64), dg.ones(2, dtype=dg.int64)
    assert (f32 * 2.5).dtype is dg.float32 and (i64 * 2.5).dtype is dg.float32 and (i64 * 2).dtype is dg.int64
    assert (f32 + f64).dtype is dg.float64 and (i64 / i64).dtype is dg.float32 and (i64 + True).dtype is dg.int64
    assert i64.exp().dtype is dg.float32 and (f32 > 0).dtype is dg.bool
    x = dg.ones(2, requires_grad=True)
    (x * f64).sum().backward()
    assert x.grad.dtype is dg.float32
    with pytest.raises(RuntimeError, match="can't be cast"):
        i64 += 1.5


def test_repr_and_conversions():
    assert repr(dg.tensor([1.0, 2.0], requires_grad=True)) == "tensor([1., 2.], requires_grad=True)"
    assert repr(dg.tensor([[1.5, 2.0], [3.0, 4.0]])) == "tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]])"
    assert repr(dg.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(dg.tensor([True, False])) == "tensor([ True, False])"
    assert repr(dg.tensor(2.0, dtype=dg.float64)) == "tensor(2., dtype=dyngrad.float64)"
    assert repr(dg.tensor([1.0], requires_grad=True) * 2) == "tensor([2.], grad_fn=<MulBackward>)"
    assert repr(dg.zeros(0, 3)) == "tensor([], size=(0, 3))"
    assert repr(dg.ones(2).shape) == "dyngrad.Size([2])" and dg.ones(2, 3).shape == (2, 3)
    t = dg.tensor([[1, 2], [3, 4]])
    assert t.tolist() == [[1, 2], [3, 4]] and len(t) == 2 and int(t[1, 1]) == 4 and float(t[0, 0]) == 1.0
    assert [row.tolist() for row in t] == [[1, 2], [3, 4]] and np.asarray(t).sum() == 10
    with pytest.raises(RuntimeError, match="numpy"):
        dg.ones(1, requires_grad=True).numpy()
    x = dg.ones(2, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and np.shares_memory(d.numpy(), x.data.numpy())
    assert x.double().dtype is dg.float64 and x.long().dtype is dg.int64 and x.float() is x


def test_max_and_min_return_values_and_indices():
    a = dg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    values, indices = a.max(dim=1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert a.min(0).indices.tolist() == [0, 1, 0] and a.max().item() == 7.0
    assert dg.max(a, dg.zeros(3)).shape == (2, 3) and a.argmax().item() == 3


def test_ties_share_the_gradient_of_amax():
    x = t64([1.0, 3.0, 3.0])
    x.amax().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.5, 0.5])


def test_dropout_and_creation():
    dg.manual_seed(0)
    a = dg.rand(3, 4)
    dg.manual_seed(0)
    assert np.array_equal(a.numpy(), dg.rand(3, 4).numpy())
    x = dg.ones(1000, requires_grad=True)
    y = dg.dropout(x, 0.25)
    kept = y.detach().numpy() != 0
    assert 600 < kept.sum() < 900 and np.allclose(y.detach().numpy()[kept], 1 / 0.75)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.detach().numpy())
    assert dg.dropout(x, 0.5, training=False) is x
    assert dg.arange(0, 1, 0.25).dtype is dg.float32 and dg.eye(2, 3).shape == (2, 3)
    assert dg.full((2,), 7).dtype is dg.int64 and dg.linspace(0, 1, 5)[-1].item() == 1.0
    assert dg.randint(0, 3, (10,)).dtype is dg.int64 and dg.zeros_like(a, dtype=dg.float64).dtype is dg.float64


def test_shared_packages_are_loaded_through_the_reference_path():
    import os
    parent = os.path.dirname(os.path.dirname(os.path.abspath(dg.__file__)))
    assert parent in dg.__path__
    module = importlib.import_module("dyngrad.reference.autograd.gradcheck")
    assert module.__package__ == "dyngrad.reference.autograd"
    assert module.Tensor is dg.Tensor


def test_op_names_have_derivatives_in_the_same_order():
    import inspect
    names = [name[:-len("_backward")] for name, fn in vars(dg.derivatives).items()
             if name.endswith("_backward") and inspect.isfunction(fn)]
    assert names == list(dg.primitives.OP_NAMES)
    assert len(set(dg.primitives.OP_NAMES)) == len(dg.primitives.OP_NAMES)
