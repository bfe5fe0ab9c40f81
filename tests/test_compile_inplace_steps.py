"""In-place arithmetic under static replay (Note [Fused steps] in csrc/bindings/replay_fuse.cpp),
on both engines: add_/sub_/mul_/div_ with a tensor, a number or an alpha, recorded as their general path and run by
the C++ loop straight into self, give eager mode's bits at every call; where the shortcut must not apply (another
dtype, overlapping memory, a broadcast alpha, a graph) the steps run as recorded; a guard miss after a shortcut
catches up with every served result a tensor of its own. The reference engine runs every step as recorded."""
import numpy as np
import pytest

from helpers import assert_bitwise_equal as assert_same


def natives(compiled):
    return [v.native() for group in compiled._program.groups.values() for v in group if v.native() is not None]


def inplace_runs(compiled):
    return sum(getattr(n, "fused_runs", 0) for n in natives(compiled))


def has_shortcut(dg):
    return hasattr(dg._C, "_ReplayProgram") and hasattr(dg._C._ReplayProgram, "fused_runs")


FORMS = {
    "add alpha": lambda q, g, h: q.add_(g, alpha=-0.05),
    "add int alpha": lambda q, g, h: q.add_(g, alpha=2),
    "add": lambda q, g, h: q.add_(g),
    "add broadcast": lambda q, g, h: q.add_(h),
    "sub alpha": lambda q, g, h: q.sub_(g, alpha=0.3),
    "sub broadcast": lambda q, g, h: q.sub_(h),
    "mul number": lambda q, g, h: q.mul_(0.9),
    "mul tensor": lambda q, g, h: q.mul_(g),
    "div number": lambda q, g, h: q.div_(3),
    "div tensor": lambda q, g, h: q.div_(h),
    "add number": lambda q, g, h: q.add_(1.5),
    "sub int": lambda q, g, h: q.sub_(2),
    "chain": lambda q, g, h: q.mul_(0.5).add_(g, alpha=0.25),
    "self operand": lambda q, g, h: q.add_(q, alpha=0.5),
}


def start(dg, dtype=np.float32):
    rng = np.random.default_rng(3)
    return [dg.tensor(rng.standard_normal((4, 3)).astype(dtype), requires_grad=True) for _ in range(2)]


@pytest.mark.parametrize("form", list(FORMS))
def test_each_in_place_form_matches_eager_and_writes_its_own_tensor(dg, form):
    """Two parameters updated with their own operands at every call: the compiled updates equal the eager ones
    bitwise (a shortcut writing into the wrong tensor, or skipping one, would differ), and on the C++ engine the
    shortcut ran for each update."""
    body = FORMS[form]
    rng = np.random.default_rng(0)

    def update(ps, gs, hs):
        with dg.no_grad():
            for q, g, h in zip(ps, gs, hs):
                body(q, g, h)
        return ps[0]
    compiled = dg.compile(update, mode="reduce-overhead")
    ps, ps_e = start(dg), start(dg)
    for i in range(5):
        gs = [dg.tensor(rng.standard_normal((4, 3)).astype(np.float32) + 2) for _ in range(2)]
        hs = [dg.tensor(rng.standard_normal(3).astype(np.float32) + 3) for _ in range(2)]
        out, out_e = compiled(ps, gs, hs), update(ps_e, gs, hs)
        assert out is ps[0]
        for q, q_e in zip(ps, ps_e):
            assert_same(q, q_e)
            assert q.grad_fn is None and q_e.grad_fn is None
    if has_shortcut(dg):
        steps = 2 if form == "chain" else 1
        assert compiled.compile_stats.replays == 4
        assert inplace_runs(compiled) == 2 * steps * 4   # 4 replays of 2 parameters


def test_a_function_returning_none_runs_its_updates_once_per_call(dg):
    """The SGD update of bench/sgd_inplace_paths.py (returning None): each call updates each parameter once."""
    ps, ps_e = start(dg), start(dg)
    for q, q_e in zip(ps, ps_e):
        q.grad = dg.ones((4, 3))
        q_e.grad = dg.ones((4, 3))

    def sgd(params):
        with dg.no_grad():
            for q in params:
                q.add_(q.grad, alpha=-0.5)
    compiled = dg.compile(sgd, mode="reduce-overhead")
    for _ in range(6):
        assert compiled(ps) is None
        sgd(ps_e)
        for q, q_e in zip(ps, ps_e):
            assert_same(q, q_e)
    assert compiled.compile_stats.replays == 5


def test_shortcut_declines_where_eager_takes_the_general_path(dg):
    """An operand overlapping self (the general path's temporary), a view written in place, an operand of another
    dtype (float64 into float32): the results equal eager mode's, and a closed-over operand rebound with another
    dtype is a guard miss (Note [State outside the arguments]), recorded anew."""
    g = dg.ones((4, 3))

    def update(q):
        with dg.no_grad():
            q.add_(g, alpha=0.5)
            q[1:].sub_(q[:-1])               # overlapping: the general path's temporary
            q[0].mul_(2.0)                   # a view of q, written through
            q.sub_(q.double().sum(0) * 1e-3)  # a float64 operand
        return q
    compiled = dg.compile(update, mode="reduce-overhead")
    q, q_e = start(dg)[0], start(dg)[0]
    for i in range(7):
        if i == 4:
            g = dg.full((4, 3), 0.25, dtype=dg.float64)
        assert_same(compiled(q), update(q_e))
        assert_same(q, q_e)
    assert compiled.compile_stats.variants == 2


def test_miss_after_a_shortcut_catches_up_with_tensors(dg):
    """A value guard after an in-place shortcut misses; the catch-up serves the skipped temporaries (each a tensor
    of its own) to the Python run again, which must issue the same calls: results and the new variant equal eager
    mode's."""
    def f(q, g):
        with dg.no_grad():
            q.add_(g, alpha=-0.5)
        if q.sum() > 0:
            return q * 2
        return q - 1
    compiled = dg.compile(f, mode="reduce-overhead")
    q = dg.tensor(np.full((3,), 4.0, np.float32))
    q_e = dg.tensor(np.full((3,), 4.0, np.float32))
    g = dg.tensor(np.full((3,), 1.5, np.float32))
    for i in range(10):
        assert_same(compiled(q, g), f(q_e, g))     # q shrinks by 0.75 a call: the branch flips at call 5
        assert_same(q, q_e)
    assert compiled.compile_stats.variants == 2
    if has_shortcut(dg):
        assert inplace_runs(compiled) >= 6


@pytest.mark.parametrize("planned", [True, False])
def test_shortcut_keeps_graphs_and_leaf_errors(dg, planned, monkeypatch):
    """With grad enabled an in-place op on a tensor with history records its graph (the shortcut declines, also
    with the planned backward off: its gradient equals eager mode's), and on a leaf that requires grad raises
    eager mode's error."""
    from dyngrad._api import capture
    monkeypatch.setattr(capture, "PLANNED_BACKWARD", planned)
    w = dg.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)

    def f(x):
        y = x * w
        y.mul_(0.5).add_(x, alpha=2.0)
        y.sum().backward()
        return y
    compiled = dg.compile(f, mode="reduce-overhead")
    w_e = dg.tensor(w.detach().numpy().copy(), requires_grad=True)

    def f_e(x):
        y = x * w_e
        y.mul_(0.5).add_(x, alpha=2.0)
        y.sum().backward()
        return y
    for i in range(4):
        x = dg.tensor(np.array([i, 1.0, -1.0], np.float32))
        assert_same(compiled(x), f_e(x))
        assert_same(w.grad, w_e.grad)

    def bad(q):
        q.add_(1.0)
        return q
    with pytest.raises(RuntimeError):
        dg.compile(bad, mode="reduce-overhead")(start(dg)[0])


OPTIMIZERS = {
    "sgd": lambda dg, ps: dg.optim.SGD(ps, lr=0.1),
    "sgd momentum nesterov wd": lambda dg, ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                                            weight_decay=0.01),
    "sgd dampening maximize": lambda dg, ps: dg.optim.SGD(ps, lr=0.05, momentum=0.5, dampening=0.2, maximize=True),
    "adam": lambda dg, ps: dg.optim.Adam(ps, lr=0.01),
    "adamw amsgrad": lambda dg, ps: dg.optim.AdamW(ps, lr=0.01, amsgrad=True, weight_decay=0.1),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimiser_steps_in_the_loop_match_eager(dg, name):
    """Note [Optimiser steps in the loop]: a training step whose fused optimiser step the C++ loop calls itself
    gives eager mode's parameters and state, bitwise, at every call; a new learning rate is a guard miss."""
    def make():
        dg.manual_seed(1)
        model = dg.nn.Sequential(dg.nn.Linear(3, 5), dg.nn.Tanh(), dg.nn.Linear(5, 2))
        opt = OPTIMIZERS[name](dg, list(model.parameters()))

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss
        return model, opt, step
    model, opt, step = make()
    model_e, opt_e, step_e = make()
    compiled = dg.compile(step, mode="reduce-overhead")
    rng = np.random.default_rng(2)
    for i in range(7):
        if i == 5:
            for o in (opt, opt_e):
                o.param_groups[0]["lr"] *= 0.5
        x = dg.tensor(rng.standard_normal((4, 3)).astype(np.float32))
        assert_same(compiled(x), step_e(x))
        for p, q in zip(model.parameters(), model_e.parameters()):
            assert_same(p, q)
            for k, v in opt.state[p].items() if opt.state.get(p) else ():
                if isinstance(v, dg.Tensor):
                    assert_same(v, opt_e.state[q][k])
    if hasattr(dg._C._ReplayProgram, "optim_steps"):
        assert sum(n.optim_steps for n in natives(compiled)) >= 1
        assert compiled.compile_stats.replays >= 3
