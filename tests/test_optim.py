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
    ("Adagrad", dict(lr=0.1, maximize=True, eps=1e-6)),
    ("RMSprop", dict(lr=0.01, centered=True, maximize=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.01, maximize=True, betas=(0.5, 0.7))),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.5, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict()),                                          # rho_t <= 5 throughout: the un-rectified branch
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),   # rho_t > 5 from step 6 on
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.8), weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08), maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1, maximize=True)),
]


def _trajectory(make_param, make_opt, set_grad, steps=8):
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


def _run_dg(dg, name, kwargs, steps=8):
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
    for name, kwargs in [("Adam", dict(lr=0.01)), ("SGD", dict(lr=0.1, momentum=0.9)), ("NAdam", dict(lr=0.01)),
                         ("ASGD", dict(lr=0.05, t0=3)), ("Rprop", dict()), ("RAdam", dict(betas=(0.9, 0.9))),
                         ("Adamax", dict()), ("Adadelta", dict())]:
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


def test_fused_kernel_used_on_cpp_engine():
    dg = importlib.import_module("dyngrad")
    from dyngrad.optim.optimizer import fused_kernel
    for name in ("sgd", "adam", "rmsprop", "adagrad"):
        assert fused_kernel(name) is not None, name
    ref = importlib.import_module("dyngrad.reference.optim.optimizer")
    assert ref.fused_kernel("adam") is None
    assert dg is not None


# ----- LBFGS ------------------------------------------------------------------------------------------------------
def _lbfgs_run(lib, dtype, steps=3, **kwargs):
    """Fit a cubic to sin(2x) + x^2 / 2 with LBFGS; return the parameters after each step and the state counters."""
    x_np = np.linspace(-1, 1, 30)
    x, y = lib.tensor(x_np.astype(dtype)), lib.tensor((np.sin(2 * x_np) + 0.5 * x_np ** 2).astype(dtype))
    w = lib.nn.Parameter(lib.tensor(np.array([0.1, -0.2, 0.05, 0.3], dtype=dtype)))
    b = lib.nn.Parameter(lib.tensor(np.array([0.0], dtype=dtype)))
    opt = lib.optim.LBFGS([w, b], **kwargs)

    def closure():
        opt.zero_grad()
        loss = ((b + w[0] * x + w[1] * x ** 2 + w[2] * x ** 3 + w[3] * x ** 4 - y) ** 2).mean()
        loss.backward()
        return loss

    out = []
    for _ in range(steps):
        loss = opt.step(closure)
        out.append(np.concatenate([w.detach().numpy(), b.detach().numpy()]))
    state = opt.state[w]
    return out, state["func_evals"], state["n_iter"], float(loss)


LBFGS_CASES = [dict(), dict(line_search_fn="strong_wolfe"), dict(history_size=2, max_iter=7),
               dict(line_search_fn="strong_wolfe", history_size=2, max_iter=9, lr=0.5),
               dict(tolerance_change=1e-3, tolerance_grad=1e-3)]


@pytest.mark.parametrize("kwargs", LBFGS_CASES, ids=[str(i) for i in range(len(LBFGS_CASES))])
def test_lbfgs_matches_torch(dg, kwargs):
    torch = pytest.importorskip("torch")
    ours = _lbfgs_run(dg, np.float64, **kwargs)
    theirs = _lbfgs_run(torch, np.float64, **kwargs)
    assert ours[1:3] == theirs[1:3]                      # the same number of closure calls and iterations
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_lbfgs_float32_and_state(dg):
    torch = pytest.importorskip("torch")
    ours = _lbfgs_run(dg, np.float32, line_search_fn="strong_wolfe")
    theirs = _lbfgs_run(torch, np.float32, line_search_fn="strong_wolfe")
    np.testing.assert_allclose(ours[0][-1], theirs[0][-1], rtol=1e-3, atol=1e-4)
    assert ours[0][-1].dtype == np.float32 and ours[3] == pytest.approx(theirs[3], rel=1e-3, abs=1e-6)
    p = dg.nn.Parameter(dg.ones(2))
    opt = dg.optim.LBFGS([p], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = ((p - 3.0) ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    assert p.tolist() == pytest.approx([3.0, 3.0])
    sd = opt.state_dict()
    tp = torch.nn.Parameter(torch.ones(2))
    topt = torch.optim.LBFGS([tp], line_search_fn="strong_wolfe")

    def torch_closure():
        topt.zero_grad()
        loss = ((tp - 3.0) ** 2).sum()
        loss.backward()
        return loss
    topt.step(torch_closure)
    assert set(sd["state"][0]) <= set(topt.state_dict()["state"][0]) | {"al"}
    assert set(sd["param_groups"][0]) == set(topt.state_dict()["param_groups"][0])
    with pytest.raises(ValueError, match="per-parameter options"):
        dg.optim.LBFGS([{"params": [p]}, {"params": [dg.nn.Parameter(dg.ones(1))]}])
    with pytest.raises(ValueError, match="line_search_fn"):
        dg.optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="closure"):
        opt.step(None)


# ----- state dicts: torch's layout, cross-engine round trips ----------------------------------------------------
STATE_CASES = [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(amsgrad=True)),
               ("AdamW", dict()), ("Adamax", dict()), ("NAdam", dict()), ("RAdam", dict()), ("Rprop", dict()),
               ("ASGD", dict()), ("Adadelta", dict()), ("Adagrad", dict()),
               ("RMSprop", dict(momentum=0.9, centered=True))]


@pytest.mark.parametrize("name,kwargs", STATE_CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(STATE_CASES)])
def test_state_dict_keys_match_torch(dg, name, kwargs):
    torch = pytest.importorskip("torch")
    sds = []
    for lib in (dg, torch):
        ps = [lib.nn.Parameter(lib.ones(3, dtype=lib.float64)), lib.nn.Parameter(lib.ones(2, dtype=lib.float64))]
        opt = getattr(lib.optim, name)([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.05}], **kwargs)
        for _ in range(2):
            for p in ps:
                p.grad = lib.full_like(p, 0.5)
            opt.step()
        sds.append(opt.state_dict())
    ours, theirs = sds
    assert set(ours) == {"state", "param_groups"}
    assert [sorted(g) for g in ours["param_groups"]] == [sorted(g) for g in theirs["param_groups"]]
    assert [g["params"] for g in ours["param_groups"]] == [[0], [1]]
    for g, h in zip(ours["param_groups"], theirs["param_groups"]):
        assert {k: v for k, v in g.items() if k != "params"} == {k: v for k, v in h.items() if k != "params"}
    assert sorted(ours["state"]) == sorted(theirs["state"])
    for i in theirs["state"]:
        assert sorted(ours["state"][i]) == sorted(theirs["state"][i])
        for key, value in theirs["state"][i].items():
            mine = ours["state"][i][key]
            mine = mine.numpy() if hasattr(mine, "numpy") else np.asarray(mine)
            np.testing.assert_allclose(mine, value.numpy() if hasattr(value, "numpy") else value, rtol=1e-6)


@pytest.mark.parametrize("name,kwargs", [("Adam", dict(amsgrad=True)), ("NAdam", dict()), ("ASGD", dict(t0=1)),
                                         ("SGD", dict(lr=0.1, momentum=0.9)), ("Rprop", dict())])
def test_state_dict_round_trip_across_engines(cpp, ref, tmp_path, name, kwargs):
    """Train on one engine, save the optimizer's state, load it into the other engine's optimizer: both then take
    the same steps (and the same as torch from torch's own state, when torch is installed)."""
    rng = np.random.default_rng(0)
    init = rng.standard_normal(5)
    grads = [rng.standard_normal(5) for _ in range(6)]

    def make(lib, values):
        p = lib.nn.Parameter(lib.tensor(values))
        return p, getattr(lib.optim, name)([p], **kwargs)

    for src, dst in ((cpp, ref), (ref, cpp)):
        p, opt = make(src, init)
        for g in grads[:3]:
            p.grad = src.tensor(g)
            opt.step()
        src.save(opt.state_dict(), tmp_path / "opt.pt")
        q, opt2 = make(dst, p.detach().numpy().copy())
        opt2.load_state_dict(dst.load(tmp_path / "opt.pt"))
        for g in grads[3:]:
            p.grad, q.grad = src.tensor(g), dst.tensor(g)
            opt.step()
            opt2.step()
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name,kwargs", [("Adam", dict(lr=0.05, amsgrad=True)), ("NAdam", dict(lr=0.05)),
                                         ("ASGD", dict(lr=0.05, t0=1)), ("Rprop", dict())])
def test_load_torch_state_dict(dg, name, kwargs):
    """A torch optimizer's state_dict (torch tensors, 'step' and scalars as 0-d tensors) loads, and the run continues
    as torch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    init, grads = rng.standard_normal(4), [rng.standard_normal(4) for _ in range(5)]
    tp = torch.nn.Parameter(torch.tensor(init))
    topt = getattr(torch.optim, name)([tp], **kwargs)
    for g in grads[:2]:
        tp.grad = torch.tensor(g)
        topt.step()
    p = dg.nn.Parameter(dg.tensor(tp.detach().numpy().copy()))
    opt = getattr(dg.optim, name)([p], **kwargs)
    opt.load_state_dict(topt.state_dict())
    assert opt.state[p]["step"] == 2
    assert all(isinstance(v, (dg.Tensor, int, float)) for v in opt.state[p].values())
    for g in grads[2:]:
        tp.grad, p.grad = torch.tensor(g), dg.tensor(g)
        topt.step()
        opt.step()
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6)


# ----- hooks, named parameters, flags ---------------------------------------------------------------------------
def test_step_hooks(dg):
    from importlib import import_module
    optimizer_module = import_module(dg.__name__ + ".optim.optimizer")
    p = dg.nn.Parameter(dg.ones(1))
    opt = dg.optim.SGD([p], lr=0.5)
    calls = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", o is opt, args, kwargs)))
    post = opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", p.item())))
    glob = optimizer_module.register_optimizer_step_pre_hook(lambda o, args, kwargs: calls.append(("global",)))
    p.grad = dg.ones(1)
    opt.step()
    assert calls == [("global",), ("pre", True, (), {}), ("post", 0.5)]
    pre.remove()
    post.remove()
    glob.remove()
    calls.clear()
    opt.step()
    assert calls == [] and p.item() == 0.0
    # a pre-hook may replace the arguments: here it supplies the closure
    opt.register_step_pre_hook(lambda o, args, kwargs: ((), {"closure": lambda: 7.0}))
    assert opt.step() == 7.0
    lb = dg.optim.LBFGS([p])
    seen = []
    lb.register_step_post_hook(lambda o, args, kwargs: seen.append(len(args) + len(kwargs)))

    def closure():
        lb.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    lb.step(closure)
    assert seen == [1]


def test_custom_optimizer_written_as_for_torch(dg):
    """A user's optimizer in torch's style: its own step() over param_groups, lazy state via self.state[p]."""
    class SignSGD(dg.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        @dg.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                    state["step"] += 1
                    p.add_(p.grad.sign(), alpha=-group["lr"])
            return None

    p = dg.nn.Parameter(dg.tensor([1.0, -1.0]))
    opt = SignSGD([p], lr=0.25)
    seen = []
    opt.register_step_post_hook(lambda o, a, k: seen.append(o.state[p]["step"]))
    for _ in range(2):
        p.grad = dg.tensor([3.0, -0.5])
        opt.step()
    assert p.tolist() == [0.5, -0.5] and seen == [1, 2] and opt.state_dict()["state"][0]["step"] == 2


def test_state_dict_hooks(dg):
    p = dg.nn.Parameter(dg.ones(2))
    opt = dg.optim.SGD([p], lr=0.1, momentum=0.9)
    calls = []
    opt.register_state_dict_pre_hook(lambda o: calls.append("pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_state_dict_pre_hook(lambda o: calls.append("first"), prepend=True)
    sd = opt.state_dict()
    assert calls == ["first", "pre"] and sd["extra"] == 1
    opt.register_load_state_dict_pre_hook(lambda o, sd: {k: v for k, v in sd.items() if k != "extra"})
    handle = opt.register_load_state_dict_post_hook(lambda o: calls.append("loaded"))
    sd["param_groups"][0]["lr"] = 0.5
    opt.load_state_dict(sd)
    assert calls[-1] == "loaded" and opt.param_groups[0]["lr"] == 0.5
    handle.remove()
    opt.load_state_dict(sd)
    assert calls.count("loaded") == 1


def test_named_parameters_and_flags(dg):
    torch = pytest.importorskip("torch")
    model = dg.nn.Linear(2, 1)
    opt = dg.optim.Adam(model.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    tmodel = torch.nn.Linear(2, 1)
    tsd = torch.optim.Adam(tmodel.named_parameters(), lr=0.1).state_dict()
    assert sorted(opt.state_dict()["param_groups"][0]) == sorted(tsd["param_groups"][0])
    p = dg.nn.Parameter(dg.ones(1))
    with pytest.raises(NotImplementedError, match="differentiable"):
        dg.optim.SGD([p], differentiable=True)
    with pytest.raises(RuntimeError, match="fused.*foreach"):
        dg.optim.Adam([p], foreach=True, fused=True)
    sgd = dg.optim.SGD([p], lr=0.1)                      # no momentum: torch keeps no per-parameter state
    p.grad = dg.ones(1)
    sgd.step()
    assert sgd.state_dict()["state"] == {}
    assert len(dg.optim.Adagrad([p]).state_dict()["state"]) == 1     # Adagrad's state exists from the start
    for name, kw in [("Adamax", dict(betas=(1.0, 0.9))), ("NAdam", dict(momentum_decay=-1)),
                     ("Rprop", dict(etas=(1.5, 1.2))), ("ASGD", dict(lr=-1)), ("Adadelta", dict(rho=2.0)),
                     ("RAdam", dict(eps=-1))]:
        with pytest.raises(ValueError):
            getattr(dg.optim, name)([p], **kw)


# ----- learning-rate schedules ------------------------------------------------------------------------------------
def _schedule(lib, name, kwargs, opt_name):
    ps = [lib.nn.Parameter(lib.ones(1)) for _ in range(2)]
    opt_kw = dict(momentum=0.9) if opt_name == "SGD" else {}
    opt = getattr(lib.optim, opt_name)([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}], lr=0.5, **opt_kw)
    L = lib.optim.lr_scheduler
    if name == "SequentialLR":
        sched = L.SequentialLR(opt, [L.LinearLR(opt, start_factor=0.1, total_iters=3), L.ExponentialLR(opt, 0.9),
                                     L.CosineAnnealingLR(opt, T_max=4)], milestones=[3, 7])
    elif name == "ChainedScheduler":
        sched = L.ChainedScheduler([L.ConstantLR(opt, factor=0.5, total_iters=4), L.ExponentialLR(opt, gamma=0.9),
                                    L.StepLR(opt, step_size=5, gamma=0.3)])
    else:
        sched = getattr(L, name)(opt, **kwargs)
    return opt, sched


SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)), ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.1)),
    ("ExponentialLR", dict(gamma=0.9)), ("CosineAnnealingLR", dict(T_max=5, eta_min=0.01)),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", dict(T_0=4)),
    ("OneCycleLR", dict(max_lr=1.0, total_steps=30)),
    ("OneCycleLR", dict(max_lr=[1.0, 2.0], epochs=3, steps_per_epoch=10, three_phase=True, anneal_strategy="linear",
                        pct_start=0.25, div_factor=10.0, final_div_factor=100.0)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=3)),
    ("CyclicLR", dict(base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3, step_size_down=5, mode="triangular2")),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range", gamma=0.9,
                      base_momentum=0.7, max_momentum=0.95)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (e + 1))),
    ("LambdaLR", dict(lr_lambda=[lambda e: 0.9 ** e, lambda e: 1.0 + e])),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.95)), ("LinearLR", dict(start_factor=0.25, total_iters=4)),
    ("LinearLR", dict(start_factor=1.0, end_factor=0.1, total_iters=6)),
    ("ConstantLR", dict(factor=0.5, total_iters=3)), ("PolynomialLR", dict(total_iters=6, power=2.0)),
    ("SequentialLR", {}), ("ChainedScheduler", {}),
]


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("name,kwargs", SCHEDULES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULES)])
def test_schedulers_match_torch(dg, name, kwargs, opt_name):
    torch = pytest.importorskip("torch")
    ours_opt, ours = _schedule(dg, name, kwargs, opt_name)
    theirs_opt, theirs = _schedule(torch, name, kwargs, opt_name)
    for step in range(30):
        assert ours.get_last_lr() == theirs.get_last_lr(), (name, step)     # the same recursion: equal floats
        momentum = [(g.get("momentum"), g["betas"][0] if "betas" in g else None) for g in ours_opt.param_groups]
        assert momentum == [(g.get("momentum"), g["betas"][0] if "betas" in g else None)
                            for g in theirs_opt.param_groups]
        ours_opt.step()
        theirs_opt.step()
        ours.step()
        theirs.step()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())


def test_reduce_lr_on_plateau_matches_torch(dg):
    torch = pytest.importorskip("torch")
    metrics = [5, 4, 4, 4, 4, 4, 3, 3.9999, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2]
    for kw in (dict(patience=2, cooldown=1, factor=0.5, min_lr=0.05), dict(mode="max", threshold_mode="abs",
                                                                           threshold=0.5, patience=0),
               dict(min_lr=[0.1, 0.01], patience=1, eps=0.2)):
        ours_opt, _ = _schedule(dg, "StepLR", dict(step_size=1), "SGD")
        theirs_opt, _ = _schedule(torch, "StepLR", dict(step_size=1), "SGD")
        ours = dg.optim.lr_scheduler.ReduceLROnPlateau(ours_opt, **kw)
        theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs_opt, **kw)
        for m in metrics:
            ours.step(m)
            theirs.step(m)
            assert ours.get_last_lr() == theirs.get_last_lr()
        assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    with pytest.raises(ValueError, match="factor"):
        dg.optim.lr_scheduler.ReduceLROnPlateau(ours_opt, factor=1.5)
    with pytest.raises(ValueError, match="mode"):
        dg.optim.lr_scheduler.ReduceLROnPlateau(ours_opt, mode="median")


def test_scheduler_state_dict_resume(dg):
    """Stop half way, save the optimizer's and the scheduler's state, rebuild both, load, and continue: the same
    lrs as an uninterrupted run."""
    for name, kwargs in SCHEDULES:
        if name in ("LambdaLR",):
            continue
        opt, sched = _schedule(dg, name, kwargs, "SGD")
        lrs = []
        for step in range(20):
            if step == 9:
                opt_state, sched_state = opt.state_dict(), sched.state_dict()
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        opt2, sched2 = _schedule(dg, name, kwargs, "SGD")
        opt2.load_state_dict(opt_state)
        sched2.load_state_dict(sched_state)
        resumed = []
        for _ in range(11):
            opt2.step()
            sched2.step()
            resumed.append(sched2.get_last_lr())
        assert resumed == lrs[9:], name


def test_scheduler_epoch_argument_and_warnings(dg):
    torch = pytest.importorskip("torch")
    import warnings
    for name, kw in [("StepLR", dict(step_size=2, gamma=0.5)), ("CosineAnnealingLR", dict(T_max=6)),
                     ("PolynomialLR", dict(total_iters=4)), ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2))]:
        (ours_opt, ours), (theirs_opt, theirs) = (_schedule(lib, name, kw, "SGD") for lib in (dg, torch))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in (3, 1, 7, 2.5 if name == "CosineAnnealingWarmRestarts" else 5):
                ours_opt.step()
                theirs_opt.step()
                ours.step(epoch)
                theirs.step(epoch)
                assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12), (name, epoch)
    opt, _ = _schedule(dg, "StepLR", dict(step_size=1), "SGD")
    sched = dg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        dg.optim.lr_scheduler.StepLR(object(), step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        dg.optim.lr_scheduler.StepLR(dg.optim.SGD([dg.nn.Parameter(dg.ones(1))]), step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="milestones"):
        dg.optim.lr_scheduler.SequentialLR(opt, [sched], milestones=[1])
