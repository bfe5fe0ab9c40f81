"""dyngrad.utils.checkpoint (both modes) and dyngrad.autograd.graph.saved_tensors_hooks / save_on_cpu, on both
engines: same gradients as without checkpointing; the hooks see the tensors every node saves."""
import functools
import importlib

import numpy as np
import pytest

from helpers import square_function

RNG = np.random.default_rng(0)
XN = RNG.normal(size=(5, 4)).astype(np.float32)


def ckpt(dg):
    return importlib.import_module(dg.__name__ + ".utils.checkpoint")


def graph(dg):
    return importlib.import_module(dg.__name__ + ".autograd.graph")


def _model(dg):
    nn = dg.nn
    dg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 8), nn.Sigmoid(),
                         nn.Linear(8, 3), nn.Softmax(dim=1))


def _grads(model, x):
    return [p.grad.numpy().copy() for p in model.parameters()] + [x.grad.numpy().copy()]


# ----- saved tensor hooks -----------------------------------------------------------------------------------------
def test_hooks_see_every_saved_tensor_and_values_are_unchanged(dg):
    g = graph(dg)
    x = dg.tensor(XN, requires_grad=True)
    w = dg.tensor(RNG.normal(size=(4, 3)).astype(np.float32), requires_grad=True)

    def forward():
        return ((x @ w).tanh().exp() * x.sum(1, keepdim=True)).log_softmax(1).sum()

    forward().backward()
    expected = (x.grad.numpy().copy(), w.grad.numpy().copy())
    x.grad = w.grad = None
    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return ("box", t.detach().numpy().copy())

    def unpack(box):
        unpacked.append(box[1].shape)
        return dg.tensor(box[1])

    with g.saved_tensors_hooks(pack, unpack):
        y = forward()
    assert len(packed) >= 5                        # matmul saves x and w, tanh/exp their outputs, mul, log_softmax
    assert (5, 4) in packed and (4, 3) in packed
    assert dg.autograd.graph_stats(y)["saved_bytes"] == 0      # the nodes hold only what pack returned
    y.backward()
    assert len(unpacked) == len(packed)
    np.testing.assert_allclose(x.grad.numpy(), expected[0], rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), expected[1], rtol=1e-6)


def test_hooks_nesting_custom_functions_and_errors(dg):
    g = graph(dg)
    calls = []
    Square = square_function(dg)
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with g.saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda t: t):
        with g.saved_tensors_hooks(lambda t: calls.append("inner") or t * 1, lambda t: calls.append("un") or t):
            y = Square.apply(x)
        z = (y * y).sum()                              # outer hooks again
    assert calls[:1] == ["inner"] and "outer" in calls
    z.backward()
    assert "un" in calls
    np.testing.assert_allclose(x.grad.numpy(), 4 * np.array([1.0, 2.0, 3.0]) ** 3)
    with g.saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="unpack hook must return a Tensor"):
        y.backward()
    with pytest.raises(TypeError, match="callables"):
        g.saved_tensors_hooks(1, 2)
    with g.disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with g.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    # after the blocks, saving is back to normal
    y = (x * x).sum()
    assert dg.autograd.graph_stats(y)["saved_bytes"] > 0


# ops that save, run by a pack hook that itself runs ops that save (issue 23: the hook fired again inside itself,
# RecursionError, until the pack hook ran with grad mode off as torch's does)
HOOKED_OPS = {
    "mul": lambda m, x, w: (x * w).sum(),
    "exp_tanh": lambda m, x, w: (x.exp().tanh() * w).sum(),
    "matmul": lambda m, x, w: (x @ w.T).sum(),
    "log_softmax": lambda m, x, w: m.nn.functional.log_softmax(x * w, 1).sum(),
    "sigmoid_pow": lambda m, x, w: (x.sigmoid() ** w).sum(),
    "linear": lambda m, x, w: m.nn.functional.linear(x, w).relu().sum(),
}


def _hooked(m, op, hook_ops):
    """(pack count, grad mode inside each pack, the gradients) of HOOKED_OPS[op] under a pack hook running ops."""
    g = importlib.import_module(m.__name__ + ".autograd.graph")
    x = m.tensor(XN, requires_grad=True)
    w = m.tensor(XN[::-1].copy(), requires_grad=True)
    modes = []

    def pack(t):
        modes.append(m.is_grad_enabled())
        if hook_ops:
            (t * t).sin().sum() + t.exp().mean()       # each saves: they must not pack again
        return t.detach().clone()

    with g.saved_tensors_hooks(pack, lambda t: t):
        HOOKED_OPS[op](m, x, w).backward()
    return len(modes), modes, x.grad.numpy().copy(), w.grad.numpy().copy()


@pytest.mark.parametrize("op", sorted(HOOKED_OPS))
def test_ops_inside_a_pack_hook_pack_nothing(dg, op):
    count, modes, gx, gw = _hooked(dg, op, True)
    assert count > 0 and not any(modes)                  # grad mode is off inside the hook, as torch
    assert _hooked(dg, op, False)[0] == count            # the hook's own ops added no packs
    x, w = dg.tensor(XN, requires_grad=True), dg.tensor(XN[::-1].copy(), requires_grad=True)
    HOOKED_OPS[op](dg, x, w).backward()
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-6)
    torch = pytest.importorskip("torch")
    assert count == _hooked(torch, op, True)[0]          # as many packs as torch


def test_pack_hook_of_a_custom_function_runs_without_grad(dg):
    g = graph(dg)
    modes = []

    def pack(t):
        modes.append(dg.is_grad_enabled())
        return (t * t).sqrt()                            # |t|: runs an op that saves, packs nothing more

    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with g.saved_tensors_hooks(pack, lambda t: t):
        square_function(dg).apply(x).sum().backward()
    assert modes == [False]
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_save_on_cpu_and_double_backward_through_hooks(dg):
    g = graph(dg)
    x = dg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with g.save_on_cpu(pin_memory=True):
        y = (x.exp() * x.sin()).sum()
    (gx,) = dg.autograd.grad(y, x, create_graph=True)
    expected = np.exp(x.detach().numpy()) * (np.sin(x.detach().numpy()) + np.cos(x.detach().numpy()))
    np.testing.assert_allclose(gx.detach().numpy(), expected, rtol=1e-6)
    (ggx,) = dg.autograd.grad(gx.sum(), x)
    xs = x.detach().numpy()
    np.testing.assert_allclose(ggx.numpy(), np.exp(xs) * 2 * np.cos(xs), rtol=1e-5)


# ----- checkpoint ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_same_grads_as_without(dg, use_reentrant):
    c = ckpt(dg)
    model = _model(dg)
    x = dg.tensor(XN, requires_grad=True)
    dg.manual_seed(1)
    (model(x) ** 2).sum().backward()
    expected = _grads(model, x)
    for run in (lambda: c.checkpoint(model, x, use_reentrant=use_reentrant),
                lambda: c.checkpoint_sequential(model, 3, x, use_reentrant=use_reentrant),
                lambda: c.checkpoint_sequential(list(model), 2, x, use_reentrant=use_reentrant)):
        model.zero_grad()
        x.grad = None
        dg.manual_seed(1)
        out = run()
        dg.rand(7)                      # the generator moves on before backward: the rerun restores it
        (out ** 2).sum().backward()
        for a, b in zip(_grads(model, x), expected):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_checkpoint_recomputes_and_keeps_nothing(dg):
    c = ckpt(dg)
    calls = []
    w = dg.tensor(RNG.normal(size=(4, 4)).astype(np.float32), requires_grad=True)

    def block(a, scale=1.0):
        calls.append(1)
        return ((a @ w).tanh() @ w).sigmoid() * scale

    x = dg.tensor(XN)                  # only the parameter needs grad: fine without reentrancy
    out = c.checkpoint(block, x, scale=2.0, use_reentrant=False)
    assert len(calls) == 1
    assert dg.autograd.graph_stats(out)["saved_bytes"] == 0
    out.sum().backward()
    assert len(calls) == 2               # rerun once in backward
    got = w.grad.numpy().copy()
    w.grad = None
    block(x, scale=2.0).sum().backward()
    np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-5)
    with dg.no_grad():                   # nothing recorded, nothing to recompute
        c.checkpoint(block, x, use_reentrant=False)
    with pytest.raises(ValueError, match="keyword arguments"):
        c.checkpoint(block, x, scale=2.0, use_reentrant=True)
    with pytest.raises(ValueError, match="determinism_check"):
        c.checkpoint(block, x, determinism_check="sometimes", use_reentrant=False)


def test_checkpoint_without_use_reentrant_warns_and_is_reentrant_as_torch(dg):
    """torch 2.13: use_reentrant not given -> a warning, then the reentrant mode, whose rules differ: keyword
    arguments are refused and parameters get no gradient when no input requires grad."""
    c = ckpt(dg)
    w = dg.tensor([2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant"):
        with pytest.raises(ValueError, match="keyword arguments"):
            c.checkpoint(lambda a, scale: a * w * scale, dg.tensor([1.0]), scale=2.0)
    with pytest.warns(UserWarning, match="use_reentrant"):
        out = c.checkpoint(lambda a: a * w, dg.tensor([1.0], requires_grad=True))
    out.sum().backward()
    assert w.grad.tolist() == [1.0]


def test_checkpoint_detects_a_different_rerun(dg):
    c = ckpt(dg)
    state = {"n": 0}
    x = dg.tensor([1.0, 2.0], requires_grad=True)

    def unstable(a):
        state["n"] += 1
        return a.exp() if state["n"] == 1 else a.exp().sin().cos()

    out = c.checkpoint(unstable, x, use_reentrant=False)
    with pytest.raises(c.CheckpointError, match="same ops"):
        out.sum().backward()


def test_checkpoint_nested_and_with_custom_functions(dg):
    ck = functools.partial(ckpt(dg).checkpoint, use_reentrant=False)

    class Cube(dg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a ** 3

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 3 * a * a * g

    w = dg.tensor([0.5, 1.5], requires_grad=True)
    x = dg.tensor([1.0, 2.0], requires_grad=True)

    def inner(a):
        return Cube.apply(a * w).tanh()

    def outer(a):
        return ck(inner, a.sin()).cos() * w

    ck(outer, x).sum().backward()
    got = (w.grad.numpy().copy(), x.grad.numpy().copy())
    w.grad = x.grad = None
    outer(x).sum().backward()
    np.testing.assert_allclose(got[0], w.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got[1], x.grad.numpy(), rtol=1e-6)


def test_double_backward_through_checkpoint(dg):
    ck = functools.partial(ckpt(dg).checkpoint, use_reentrant=False)
    x = dg.tensor([0.3, 1.2, -0.7], dtype=dg.float64, requires_grad=True)

    def f(a):
        return (a.exp() * a.sin()).sum()

    (g,) = dg.autograd.grad(ck(f, x), x, create_graph=True)
    (gg,) = dg.autograd.grad(g.sum(), x)
    xs = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(), np.exp(xs) * (np.sin(xs) + np.cos(xs)), rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), 2 * np.exp(xs) * np.cos(xs), rtol=1e-12)
