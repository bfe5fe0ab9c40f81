"""Optimisers and lr schedules: torch's update rules (torch as oracle when installed, else hand-computed steps)."""
import importlib
import math

import numpy as np
import pytest


@pytest.fixture(params=["cpp", "reference"])
def dg(request):
    return importlib.import_module("dyngrad" if request.param == "cpp" else "dyngrad.reference")


SHAPES = [(3, 4), (4,), (2, 3, 2)]

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.02, maximize=True, eps=1e-6)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.5, amsgrad=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5)),
]


def _trajectory(make_param, make_opt, set_grad, steps=5):
    """Run `steps` optimiser steps with gradients given as numpy arrays; return the parameters as numpy."""
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s) for s in SHAPES]
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]
    params = [make_param(a) for a in init]
    opt = make_opt(params)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            set_grad(p, g)
        opt.step()
    return [np.array(p.detach().numpy()) for p in params]


def _run_dg(dg, name, kwargs, steps=5):
    return _trajectory(lambda a: dg.nn.Parameter(dg.tensor(a)),
                       lambda ps: getattr(dg.optim, name)(ps, **kwargs),
                       lambda p, g: setattr(p, "grad", dg.tensor(g)), steps)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_torch(dg, name, kwargs):
    torch = pytest.importorskip("torch")
    ours = _run_dg(dg, name, kwargs)
    theirs = _trajectory(lambda a: torch.nn.Parameter(torch.tensor(a)),
                         lambda ps: getattr(torch.optim, name)(ps, **kwargs),
                         lambda p, g: setattr(p, "grad", torch.tensor(g)))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)


def test_float32_params(dg):
    torch = pytest.importorskip("torch")
    for name, kwargs in [("Adam", dict(lr=0.01)), ("SGD", dict(lr=0.1, momentum=0.9))]:
        ours = _trajectory(lambda a: dg.nn.Parameter(dg.tensor(a.astype(np.float32))),
                           lambda ps: getattr(dg.optim, name)(ps, **kwargs),
                           lambda p, g: setattr(p, "grad", dg.tensor(g.astype(np.float32))))
        theirs = _trajectory(lambda a: torch.nn.Parameter(torch.tensor(a.astype(np.float32))),
                             lambda ps: getattr(torch.optim, name)(ps, **kwargs),
                             lambda p, g: setattr(p, "grad", torch.tensor(g.astype(np.float32))))
        for a, b in zip(ours, theirs):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_hand_computed_steps(dg):
    # one parameter p = 1, gradient 0.5 at every step (no torch needed)
    def run(opt_cls, **kw):
        p = dg.nn.Parameter(dg.tensor([1.0], dtype=dg.float64))
        opt = opt_cls([p], **kw)
        for _ in range(2):
            p.grad = dg.tensor([0.5], dtype=dg.float64)
            opt.step()
        return p.item()

    # SGD momentum 0.9: buf = 0.5 then 0.95; p = 1 - 0.1*0.5 - 0.1*0.95
    assert run(dg.optim.SGD, lr=0.1, momentum=0.9) == pytest.approx(1 - 0.05 - 0.095, rel=1e-12)
    # Adam with a constant gradient: each bias-corrected step is lr * g / (|g| + eps')
    eps = 1e-8
    expected = 1.0
    for t in (1, 2):
        m = 0.5 * (1 - 0.9 ** t)
        v = 0.25 * (1 - 0.999 ** t)
        expected -= 0.01 / (1 - 0.9 ** t) * m / (math.sqrt(v) / math.sqrt(1 - 0.999 ** t) + eps)
    assert run(dg.optim.Adam, lr=0.01) == pytest.approx(expected, rel=1e-12)
    # Adagrad: sum = 0.25, 0.5; p -= 0.1 * 0.5 / sqrt(sum)
    assert run(dg.optim.Adagrad, lr=0.1, eps=0.0) == pytest.approx(1 - 0.1 - 0.1 * 0.5 / math.sqrt(0.5), rel=1e-12)
    # RMSprop: sq = 0.0025, 0.004975
    sq1, sq2 = 0.01 * 0.25, 0.99 * 0.01 * 0.25 + 0.01 * 0.25
    assert run(dg.optim.RMSprop, lr=0.01, eps=0.0) == pytest.approx(
        1 - 0.01 * 0.5 / math.sqrt(sq1) - 0.01 * 0.5 / math.sqrt(sq2), rel=1e-12)


def test_skips_params_without_grad_and_trains(dg):
    dg.manual_seed(0)
    model = dg.nn.Linear(3, 1)
    unused = dg.nn.Parameter(dg.ones(2))
    opt = dg.optim.Adam(list(model.parameters()) + [unused], lr=0.05)
    x = dg.tensor(np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32))
    y = x @ dg.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    first = None
    for _ in range(200):
        opt.zero_grad()
        loss = dg.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 1e-3 < first
    assert unused.tolist() == [1.0, 1.0] and unused not in opt.state


def test_param_groups_and_add_param_group(dg):
    a = dg.nn.Parameter(dg.ones(2))
    b = dg.nn.Parameter(dg.ones(2))
    opt = dg.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    c = dg.nn.Parameter(dg.ones(2))
    opt.add_param_group({"params": c, "lr": 0.5})
    for p in (a, b, c):
        p.grad = dg.ones(2)
    opt.step()
    assert a.tolist() == pytest.approx([0.9, 0.9]) and b.tolist() == [0.0, 0.0] and c.tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        dg.optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="invalid learning rate"):
        dg.optim.Adam([a], lr=-1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        dg.optim.SGD([1.0], lr=0.1)


def test_zero_grad(dg):
    p = dg.nn.Parameter(dg.ones(2))
    opt = dg.optim.SGD([p], lr=0.1)
    p.grad = dg.ones(2)
    opt.zero_grad(set_to_none=False)
    assert p.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


def test_state_dict_round_trip(dg):
    def make():
        ps = [dg.nn.Parameter(dg.tensor(np.arange(4.0) + i)) for i in range(2)]
        return ps, dg.optim.Adam(ps, lr=0.1, amsgrad=True)

    ps, opt = make()
    for _ in range(3):
        for p in ps:
            p.grad = p.detach() * 0.5
        opt.step()
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0, 1] and sd["state"][0]["step"] == 3
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    ps2, opt2 = make()
    with dg.no_grad():
        for p, q in zip(ps2, ps):
            p.copy_(q)
    opt2.load_state_dict(sd)
    for opt_, ps_ in ((opt, ps), (opt2, ps2)):
        for p in ps_:
            p.grad = dg.ones(4, dtype=p.dtype)
        opt_.step()
    for p, q in zip(ps, ps2):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    bad = {"state": {}, "param_groups": sd["param_groups"] * 2}
    with pytest.raises(ValueError, match="parameter groups"):
        opt2.load_state_dict(bad)


def test_lr_schedulers(dg):
    torch = pytest.importorskip("torch")
    cases = [("StepLR", dict(step_size=3, gamma=0.5)), ("MultiStepLR", dict(milestones=[2, 5], gamma=0.1)),
             ("ExponentialLR", dict(gamma=0.9)), ("CosineAnnealingLR", dict(T_max=7, eta_min=0.01)),
             ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (e + 1)))]
    for name, kw in cases:
        ours_opt = dg.optim.SGD([dg.nn.Parameter(dg.ones(1))], lr=0.5)
        theirs_opt = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.5)
        ours = getattr(dg.optim.lr_scheduler, name)(ours_opt, **kw)
        theirs = getattr(torch.optim.lr_scheduler, name)(theirs_opt, **kw)
        for _ in range(10):
            ours_opt.step()
            theirs_opt.step()
            ours.step()
            theirs.step()
            assert ours.get_last_lr()[0] == pytest.approx(theirs.get_last_lr()[0], rel=1e-12, abs=1e-15), name


def test_fused_kernel_used_on_cpp_engine():
    dg = importlib.import_module("dyngrad")
    from dyngrad.optim.optimizer import fused_kernel
    for name in ("sgd", "adam", "rmsprop", "adagrad"):
        assert fused_kernel(name) is not None, name
    ref = importlib.import_module("dyngrad.reference.optim.optimizer")
    assert ref.fused_kernel("adam") is None
    assert dg is not None
