"""The fused derivatives are primitives of their own (Note [Fused derivatives as primitives] in
csrc/dyngrad/derivatives.cpp): tanh_backward, sigmoid_backward, gelu_backward, threshold_backward,
softmax_backward, log_softmax_backward, cross_entropy_backward, layer_norm_backward and rnn_layer_backward.

Each one's forward (the fused kernel) and formula (its derivative, in differentiable ops) are checked by gradcheck
and gradgradcheck in float64 on both engines, and its values against the formula it replaces and against torch
where torch has the op. One path per derivative: derivatives.cpp asks nowhere whether the backward is recorded.
"""
import os
import re

import numpy as np
import pytest


ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def leaf(m, array):
    return m.tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


def tensors_only(fn):
    """fn's tensor outputs (layer_norm_backward and rnn_layer_backward give None for the gradients not asked for)."""
    def run(*args):
        out = fn(*args)
        return tuple(o for o in out if o is not None) if isinstance(out, tuple) else out
    return run


def unary_case(name, low, high):
    def make(m, rng):
        grad = leaf(m, rng.standard_normal((2, 3)))
        x = leaf(m, rng.uniform(low, high, (2, 3)))
        return getattr(m._C, name), (grad, x)
    return make


def threshold_case(m, rng):
    grad = leaf(m, rng.standard_normal((2, 3)))
    x = leaf(m, rng.choice([-1, 1], (2, 3)) * rng.uniform(0.2, 1.0, (2, 3)))   # away from the kink
    return m._C.threshold_backward, (grad, x)


def softmax_case(name, dim):
    def make(m, rng):
        grad = leaf(m, rng.standard_normal((2, 4)))
        out = leaf(m, rng.uniform(-1.0, 0.0, (2, 4)) if name.startswith("log") else rng.uniform(0.1, 0.6, (2, 4)))
        return (lambda g, y: getattr(m._C, name)(g, y, dim)), (grad, out)
    return make


def cross_entropy_case(reduction, label_smoothing, batched=True):
    def make(m, rng):
        target = m.tensor(np.array([2, -100, 0]) if batched else np.array(1))   # -100: an ignored row
        logits = leaf(m, rng.standard_normal((3, 4) if batched else (4,)))
        grad = leaf(m, rng.standard_normal(tuple(target.shape)) if reduction == 0 else rng.standard_normal(()))
        fn = (lambda g, x: m._C.cross_entropy_backward(g, x, target, reduction, -100, label_smoothing))
        return fn, (grad, logits)
    return make


def layer_norm_case(weighted, ndims):
    def make(m, rng):
        a = leaf(m, rng.standard_normal((2, 3, 4)))
        grad = leaf(m, rng.standard_normal((2, 3, 4)))
        norm_shape = (3, 4)[2 - ndims:]
        if weighted:
            w = leaf(m, rng.standard_normal(norm_shape))
            fn = (lambda g, x, w: m._C.layer_norm_backward(g, x, w, ndims, 1e-5, (True, True, True)))
            return tensors_only(fn), (grad, a, w)
        fn = (lambda g, x: m._C.layer_norm_backward(g, x, None, ndims, 1e-5, (True, True, True)))
        return tensors_only(fn), (grad, a)
    return make


GATES = {0: 1, 1: 1, 2: 4, 3: 3}


def rnn_case(mode, reverse):
    """rnn_layer_backward through autograd: the first derivative of rnn_layer (its forward keeps the gate
    activations rnn_layer_backward reads, which Python does not see)."""
    def make(m, rng):
        L, N, H, G = 2, 1, 2, GATES[mode]
        gi = leaf(m, 0.5 * rng.standard_normal((L, N, G * H)))
        h0 = leaf(m, 0.5 * rng.standard_normal((N, H)))
        c0 = leaf(m, 0.5 * rng.standard_normal((N, H))) if mode == 2 else None
        w = leaf(m, 0.5 * rng.standard_normal((G * H, H)))
        b = leaf(m, 0.5 * rng.standard_normal((G * H,)))
        grad = leaf(m, rng.standard_normal((2 if mode == 2 else 1, L, N, H)))
        ins = [t for t in (gi, h0, c0, w, b) if t is not None]

        def first_derivative(grad, *ins):
            gi, h0, *rest = ins
            c0 = rest.pop(0) if mode == 2 else None
            w, b = rest
            if mode == 1:   # relu: keep every pre-activation away from the kink
                gi = gi + 3.0
            out = m._C.rnn_layer(gi, h0, c0, w, b, mode, reverse)
            return m.autograd.grad(out, ins, grad, create_graph=True)
        return first_derivative, (grad, *ins)
    return make


CASES = {
    "tanh_backward": unary_case("tanh_backward", -0.9, 0.9),
    "sigmoid_backward": unary_case("sigmoid_backward", 0.1, 0.9),
    "gelu_backward": unary_case("gelu_backward", -2.0, 2.0),
    "threshold_backward": threshold_case,
    "softmax_backward": softmax_case("softmax_backward", 1),
    "softmax_backward_dim0": softmax_case("softmax_backward", 0),
    "log_softmax_backward": softmax_case("log_softmax_backward", -1),
    "cross_entropy_backward_none": cross_entropy_case(0, 0.0),
    "cross_entropy_backward_mean_smoothed": cross_entropy_case(1, 0.2),
    "cross_entropy_backward_sum": cross_entropy_case(2, 0.0),
    "cross_entropy_backward_unbatched": cross_entropy_case(1, 0.1, batched=False),
    "layer_norm_backward": layer_norm_case(True, 1),
    "layer_norm_backward_two_dims": layer_norm_case(True, 2),
    "layer_norm_backward_no_weight": layer_norm_case(False, 1),
    **{f"rnn_layer_backward_mode{mode}{'_reverse' if reverse else ''}": rnn_case(mode, reverse)
       for mode in (0, 1, 2, 3) for reverse in (False, True) if not (reverse and mode in (0, 1))},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_and_gradgradcheck(dg, name):
    fn, inputs = CASES[name](dg, np.random.default_rng(7))
    assert dg.autograd.gradcheck(fn, inputs)
    assert dg.autograd.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_values_on_both_engines(cpp, ref, name):
    values = []
    for m in (cpp, ref):
        fn, inputs = CASES[name](m, np.random.default_rng(3))
        out = fn(*inputs)
        values.append([o.detach().numpy() for o in (out if isinstance(out, tuple) else (out,))])
    for c, r in zip(*values):
        np.testing.assert_allclose(c, r, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu", "gelu"])
def test_unary_derivatives_are_the_formulas(dg, name):
    """The fused kernel gives the formula it replaced: grad * f'(x), in float32 and float64 (the float32 GELU kernel
    is an approximation: to a few ulps)."""
    rng = np.random.default_rng(1)
    for dtype, rtol in (("float64", 1e-13), ("float32", 1e-5)):
        xv = rng.standard_normal((5, 7)).astype(dtype)
        gv = rng.standard_normal((5, 7)).astype(dtype)
        x = dg.tensor(xv, requires_grad=True)
        fn = dg.nn.functional.gelu if name == "gelu" else getattr(dg, name)
        got, = dg.autograd.grad(fn(x), x, dg.tensor(gv))
        y = fn(x).detach().numpy().astype(np.float64)
        xd = xv.astype(np.float64)
        from math import erf, pi
        derivative = {"tanh": 1 - y * y, "sigmoid": y * (1 - y), "relu": (xd > 0).astype(np.float64),
                      "gelu": 0.5 * (1 + np.vectorize(erf)(xd / np.sqrt(2))) + xd * np.exp(-xd * xd / 2) / np.sqrt(2 * pi)}
        np.testing.assert_allclose(got.numpy(), gv * derivative[name], rtol=rtol, atol=rtol)


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "relu", "gelu"])
def test_unary_derivatives_over_odd_lengths(dg, name):
    """Note [Flattened loop bodies] (kernels/elementwise.cpp): the vectorised loops of the fused derivatives and of
    the forwards, over lengths that are not multiples of the vector width and over sizes that split across threads
    (contiguous, and through the strided path), against float64 formulas."""
    from math import erf, pi
    rng = np.random.default_rng(2)
    fn = dg.nn.functional.gelu if name == "gelu" else getattr(dg, name)
    exact = {"tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
             "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2),
             "relu": (lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(np.float64)),
             "gelu": (lambda x: 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2))),
                      lambda x: 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * pi))}
    f, df = exact[name]
    for n in (1, 7, 15, 17, 33, 1001, 70001):
        for dtype, tol in (("float64", 1e-12), ("float32", 3e-6)):
            xv = rng.uniform(-6, 6, n).astype(dtype)
            gv = rng.standard_normal(n).astype(dtype)
            xd = xv.astype(np.float64)
            x = dg.tensor(xv, requires_grad=True)
            y = fn(x)
            np.testing.assert_allclose(y.detach().numpy(), f(xd), rtol=tol, atol=tol)
            got, = dg.autograd.grad(y, x, dg.tensor(gv))
            np.testing.assert_allclose(got.numpy(), gv * df(xd), rtol=tol, atol=tol)
            if n > 1:  # every other element: strided operands
                xs = dg.tensor(np.repeat(xv, 2)).requires_grad_()[::2]
                got, = dg.autograd.grad(fn(xs), xs, dg.tensor(np.repeat(gv, 2))[::2])
                np.testing.assert_allclose(got.numpy(), gv * df(xd), rtol=tol, atol=tol)


def test_third_derivatives_of_layer_norm_and_lstm_match_torch(dg):
    """Note [Derivatives of fused backwards]: the VJP of the definition stays differentiable: third derivatives."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    xv, wv = rng.standard_normal((2, 3)), rng.standard_normal(3)
    results = []
    for m in (dg, torch):
        x = m.tensor(xv, requires_grad=True, dtype=m.float64)
        w = m.tensor(wv, requires_grad=True, dtype=m.float64)
        y = (m.nn.functional.layer_norm(x, (3,), w) ** 3).sum()
        g1, = m.autograd.grad(y, x, create_graph=True)
        g2, = m.autograd.grad((g1 * g1).sum(), x, create_graph=True)
        g3, = m.autograd.grad(g2.sum(), w)
        results.append(g3.detach().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9, atol=1e-10)


def test_one_path_per_derivative():
    """No formula asks whether the backward is being recorded (the fused kernels are primitives instead)."""
    with open(os.path.join(ROOT, "csrc", "dyngrad", "derivatives.cpp"), encoding="utf-8") as f:
        text = f.read()
    assert not re.search(r"GradMode::is_enabled\(\)", text)
    with open(os.path.join(ROOT, "python", "dyngrad", "reference", "derivatives.py"), encoding="utf-8") as f:
        assert "is_grad_enabled" not in f.read()


@pytest.mark.parametrize("call, error, message", [
    (lambda m, a: m._C.tanh_backward(a, a.reshape(3, 2)), RuntimeError, r"tanh_backward: shapes \(2, 3\) and \(3, 2\)"),
    (lambda m, a: m._C.softmax_backward(a, a[0], 0), RuntimeError, r"softmax_backward: expected a gradient and an output"),
    (lambda m, a: m._C.softmax_backward(a, a, 2), IndexError, r"softmax_backward: dim 2 is out of range"),
    (lambda m, a: m._C.cross_entropy_backward(a, a, m.tensor([0, 9]), 0, -100, 0.0), RuntimeError,
     r"cross_entropy_backward: expected a floating-point gradient of shape \(2,\)"),
    (lambda m, a: m._C.cross_entropy_backward(a[:, 0], a, m.tensor([0, 9]), 0, -100, 0.0), IndexError,
     r"cross_entropy_backward: target 9 is out of range for 3 classes"),
    (lambda m, a: m._C.layer_norm_backward(a[0], a, None, 1, 1e-5, (True, True, True)), RuntimeError,
     r"layer_norm_backward: expected a floating-point gradient of the input's shape \(2, 3\)"),
    (lambda m, a: m._C.layer_norm_backward(a, a, a, 1, 1e-5, (True, True, True)), RuntimeError,
     r"layer_norm_backward: expected a float32 weight of shape \(3,\)"),
])
def test_bad_arguments_name_the_op(dg, call, error, message):
    a = dg.ones(2, 3)
    with pytest.raises(error, match=message):
        call(dg, a)
