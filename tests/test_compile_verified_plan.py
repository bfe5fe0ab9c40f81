"""Verified replay that runs matched ops from the recording's plan (Note [Verified ops run from the plan] in
csrc/bindings/fast_paths.cpp), on both engines: the forward's matched ops make no graph node, the backward runs as
the recorded plan, and wherever Python leaves the recording (a branch, a loop count, a value read in Python, the
end of the program) in the middle of the forward that feeds a backward, the graph of what has run is rebuilt, so
gradients, grad_fn and requires_grad are eager mode's. Every result is compared bitwise with eager mode's."""
import warnings

import numpy as np
import pytest

from helpers import array_tensor, assert_bitwise_equal

t = array_tensor
assert_same = assert_bitwise_equal


def verified(dg, fn, **kwargs):
    return dg.compile(fn, mode="verified", **kwargs)


def params(dg, seed=0):
    rng = np.random.default_rng(seed)
    a = dg.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    b = dg.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    return a, b


def run_both(dg, fn, make_args, calls, seed=0):
    """Calls the compiled fn and fn itself on twin parameters `calls` times; compares outputs and gradients."""
    compiled = verified(dg, fn)
    pc, pe = params(dg, seed), params(dg, seed)
    for k in range(calls):
        args = make_args(k)
        out_c = compiled(pc, *args(dg))
        out_e = fn(pe, *args(dg))
        assert_same(out_c, out_e)
        for p, q in zip(pc, pe):
            assert_same(p.grad, q.grad)
    return compiled


def test_a_branch_that_flips_in_the_middle_of_the_forward(dg):
    """A Python counter flips the program halfway through the forward that feeds backward(): the ops before the
    flip ran from the plan, so their graph is rebuilt when the call leaves the recording."""
    counter = [0]

    def f(p, x):
        a, b = p
        counter[0] += 1
        y = (x * a + b).tanh()
        y = (y * a).sin()
        if counter[0] % 3 == 0:
            y = y * y + 1.0
        y = (y * b).tanh()
        y.sum().backward()
        return y
    compiled = verified(dg, f)
    pc, pe = params(dg), params(dg)
    for k in range(8):
        x = np.full(3, 0.1 * k, np.float32)
        counter_at = counter[0]
        out_c = compiled(pc, dg.tensor(x))
        counter[0] = counter_at
        out_e = f(pe, dg.tensor(x))
        assert_same(out_c, out_e)
        assert out_c.requires_grad and out_c.grad_fn is not None
        assert type(out_c.grad_fn).__name__ == type(out_e.grad_fn).__name__ or \
            out_c.grad_fn.name() == out_e.grad_fn.name()
        for p, q in zip(pc, pe):
            assert_same(p.grad, q.grad)
    stats = compiled.compile_stats
    assert stats.hits >= 4, stats.guard_misses


def test_loop_counts_that_change(dg):
    def f(p, x, n):
        a, b = p
        y = x
        for _ in range(n):
            y = (y * a + b).tanh()
        loss = y.sum()
        loss.backward()
        return loss
    counts = [3, 3, 5, 3, 5, 2, 2, 5]
    compiled = run_both(dg, f, lambda k: (lambda dg: (dg.tensor(np.full(3, 0.2, np.float32)), counts[k])),
                        len(counts))
    assert compiled.compile_stats.hits >= 4


def test_values_read_in_python_that_change(dg):
    """.item() and bool() in the middle of the forward: a new value leaves the recording there."""
    def f(p, x):
        a, b = p
        y = (x * a).tanh()
        s = y.sum()
        if s.item() > 0:
            y = y * b
        else:
            y = y - b
        z = (y * a).exp()
        if bool((z > 1.5).any()):
            z = z * 0.5
        z.sum().backward()
        return z
    xs = [[0.5, 0.2, 0.1], [0.5, 0.2, 0.1], [-1.0, -2.0, 0.3], [-1.0, -2.0, 0.3], [3., 3., 3.], [0.5, 0.2, 0.1]]
    run_both(dg, f, lambda k: (lambda dg: (dg.tensor(np.array(xs[k], np.float32)),)), len(xs))


def test_the_program_returning_before_the_recorded_backward(dg):
    """A call that ends before the recorded backward (Python skips it) gets a forward with its graph: the caller's
    own backward gives eager mode's gradients."""
    flag = [True]

    def f(p, x):
        a, b = p
        y = ((x * a + b).tanh() * a).sum()
        if flag[0]:
            y.backward()
        return y
    compiled = verified(dg, f)
    pc, pe = params(dg), params(dg)
    for k, backward_inside in enumerate([True, True, False, True, False, False]):
        flag[0] = backward_inside
        x = np.full(3, 0.3 + k, np.float32)
        out_c, out_e = compiled(pc, dg.tensor(x)), f(pe, dg.tensor(x))
        assert_same(out_c, out_e)
        assert out_c.requires_grad and out_c.grad_fn is not None
        if not backward_inside:
            out_c.backward()
            out_e.backward()
        for p, q in zip(pc, pe):
            assert_same(p.grad, q.grad)


def test_outputs_keep_eager_autograd_state(dg):
    """After the planned backward, an output with history has a grad_fn (released, as eager mode's: a second
    backward raises) and requires grad; an intermediate read in Python afterwards too."""
    def f(p, x):
        a, b = p
        h = (x * a + b).tanh()
        y = (h * b).exp().sum()
        y.backward()
        return y, h
    compiled = verified(dg, f)
    pc, pe = params(dg), params(dg)
    for _ in range(3):
        (y, h), (ye, he) = compiled(pc, t(dg, [1., 2., 3.])), f(pe, t(dg, [1., 2., 3.]))
        assert_same(y, ye)
        assert_same(h, he)
        assert y.requires_grad and h.requires_grad and not y.is_leaf and not h.is_leaf
        with pytest.raises(RuntimeError):
            ye.backward()
        with pytest.raises(RuntimeError):
            y.backward()
    for p, q in zip(pc, pe):
        assert_same(p.grad, q.grad)


def test_dropout_train_eval_and_grad_mode(dg):
    dg.manual_seed(0)
    model_c = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.Dropout(0.3), dg.nn.Tanh(), dg.nn.Linear(8, 2))
    dg.manual_seed(0)
    model_e = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.Dropout(0.3), dg.nn.Tanh(), dg.nn.Linear(8, 2))

    def step(model, x):
        out = model(x)
        if out.requires_grad:
            out.square().mean().backward()
        return out
    compiled = verified(dg, step)
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    for k, (training, grad) in enumerate([(True, True), (True, True), (False, True), (True, True),
                                          (True, False), (False, False), (True, True), (False, True)]):
        model_c.train(training)
        model_e.train(training)
        dg.manual_seed(10 + k)
        with dg.set_grad_enabled(grad):
            out_c = compiled(model_c, dg.tensor(x))
        dg.manual_seed(10 + k)
        with dg.set_grad_enabled(grad):
            out_e = step(model_e, dg.tensor(x))
        assert_same(out_c, out_e)
        assert out_c.requires_grad == out_e.requires_grad
        for p, q in zip(model_c.parameters(), model_e.parameters()):
            assert_same(p.grad, q.grad)


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_training_steps_follow_eager_mode(dg, optimizer):
    make = {"SGD": lambda ps: dg.optim.SGD(ps, lr=0.05, momentum=0.9),
            "Adam": lambda ps: dg.optim.Adam(ps, lr=0.01)}[optimizer]
    dg.manual_seed(1)
    model_c = dg.nn.Sequential(dg.nn.Linear(6, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))
    dg.manual_seed(1)
    model_e = dg.nn.Sequential(dg.nn.Linear(6, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))
    opt_c, opt_e = make(model_c.parameters()), make(model_e.parameters())

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    compiled = verified(dg, step)
    rng = np.random.default_rng(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(8):
            x = rng.standard_normal((5, 6)).astype(np.float32)
            y = rng.integers(0, 3, 5)
            loss_c = compiled(model_c, opt_c, dg.tensor(x), dg.tensor(y))
            loss_e = step(model_e, opt_e, dg.tensor(x), dg.tensor(y))
            assert_same(loss_c, loss_e)
            assert loss_c.requires_grad
    for p, q in zip(model_c.parameters(), model_e.parameters()):
        assert_same(p, q)
        assert_same(p.grad, q.grad)
    assert compiled.compile_stats.hits >= 5


def test_an_error_in_the_middle_of_the_forward(dg):
    """An exception raised by Python halfway through the forward: the tensors computed so far that escape (here
    through a list) carry their graph."""
    seen = []

    def f(p, x, fail):
        a, b = p
        y = (x * a + b).tanh()
        seen.append(y)
        if fail:
            raise ValueError("stop")
        z = (y * b).sum()
        z.backward()
        return z
    compiled = verified(dg, f)
    pc, pe = params(dg), params(dg)
    for fail in (False, False, True):
        x = t(dg, [0.5, 1.0, 1.5])
        if fail:
            with pytest.raises(ValueError):
                compiled(pc, x, True)
            y = seen[-1]
            assert y.requires_grad and y.grad_fn is not None
            y.sum().backward()
            with pytest.raises(ValueError):
                f(pe, t(dg, [0.5, 1.0, 1.5]), True)
            seen[-1].sum().backward()
        else:
            assert_same(compiled(pc, x, fail), f(pe, t(dg, [0.5, 1.0, 1.5]), fail))
    for p, q in zip(pc, pe):
        assert_same(p.grad, q.grad)


def test_autograd_state_read_in_the_middle_of_the_forward(dg):
    """grad_fn, is_leaf and requires_grad read in Python before the backward see eager mode's values: the ops run
    from the plan get their graph first."""
    seen_c, seen_e = [], []

    def f(p, x, seen):
        a, b = p
        h = (x * a + b).tanh()
        seen.append((h.grad_fn is None, h.is_leaf, h.requires_grad, h.grad_fn.name() if h.grad_fn else None))
        y = (h * b).sum()
        y.backward()
        return y
    compiled = verified(dg, lambda p, x: f(p, x, seen_c))
    pc, pe = params(dg), params(dg)
    for _ in range(4):
        assert_same(compiled(pc, t(dg, [1., 2., 3.])), f(pe, t(dg, [1., 2., 3.]), seen_e))
    assert seen_c == seen_e
    for p, q in zip(pc, pe):
        assert_same(p.grad, q.grad)


def test_the_plan_runs_on_the_cpp_engine(cpp):
    """On the C++ engine the hits run from the plan, and a call that leaves in the middle of the forward rebuilds
    the graph of what ran (compile_stats.verified_planned, verified_rebuilt)."""
    a = cpp.tensor(np.array([0.5, -1.0], np.float32), requires_grad=True)

    def f(x, n):
        y = x
        for _ in range(n):
            y = (y * a).tanh()
        y.sum().backward()
        return y
    compiled = verified(cpp, f)
    for n in (3, 3, 3, 5, 3, 3):
        compiled(cpp.tensor(np.array([0.1, 0.2], np.float32)), n)
    stats = compiled.compile_stats
    assert stats.as_dict()["verified_planned"] == stats.verified_planned
    assert stats.verified_planned >= 3 and stats.verified_rebuilt >= 1, (stats.verified_planned,
                                                                         stats.verified_rebuilt)


def test_cross_entropy_is_matched_in_cpp(cpp):
    """cross_entropy(x, y)'s fast path matches its Python definition's two steps (the target check and the op), so a
    training step's every call is matched in C++; a target out of range raises as in eager mode."""
    rng = np.random.default_rng(4)
    x = cpp.tensor(rng.standard_normal((6, 4)).astype(np.float32), requires_grad=True)
    xe = cpp.tensor(x.detach().numpy().copy(), requires_grad=True)

    def f(x, y):
        loss = cpp.nn.functional.cross_entropy(x * 2.0, y)
        loss.backward()
        return loss
    compiled = verified(cpp, f)
    for k in range(4):
        y = rng.integers(0, 4, 6)
        assert_same(compiled(x, cpp.tensor(y)), f(xe, cpp.tensor(y)))
        assert_same(x.grad, xe.grad)
    s = compiled.compile_stats
    steps = list(compiled._program.groups.values())[0][0].steps
    assert [st.name for st in steps][:4] == ["scalar_operand", "mul", "validate", "cross_entropy"]
    assert s.hits == 3 and s.matched_in_cpp == 3 * len(steps), (s.matched_in_cpp, len(steps))
    bad = cpp.tensor(np.array([0, 1, 2, 3, 4, 0]))
    with pytest.raises(IndexError) as eager_error:
        f(xe, bad)
    with pytest.raises(IndexError) as error:
        compiled(x, bad)
    assert str(error.value) == str(eager_error.value)


def test_arguments_passed_twice_and_parameters_passed_as_arguments(dg):
    """Note [A verified call's setup in one call] (csrc/bindings/fast_paths.cpp): the cursor takes the slots of the
    arguments and of the group's externals itself. A tensor passed twice keeps its first slot, and a parameter read
    as an external and also passed as an argument takes the external's slot, as the Python recorder's slot map has
    them. Every result and gradient is eager mode's."""
    w, w2 = params(dg, 3)

    def f(p, x, y):
        a, b = p
        out = ((x * a).tanh() * (y + b)).sum() + (x * w).sum()
        out.backward()
        return out

    for args in (lambda k: (lambda dg: (t(dg, [0.1, 0.2, 0.3]),) * 2),      # the same tensor twice
                 lambda k: (lambda dg: (w, t(dg, [0.5, -0.5, float(k)])))):  # a parameter as an argument
        run_both(dg, f, args, 5)
    compiled = verified(dg, f)
    p = params(dg, 1)
    x = t(dg, [0.3, 0.1, 0.2])
    for _ in range(4):
        w.grad = None
        compiled(p, x, x)
    stats = compiled.compile_stats
    assert (stats.variants, stats.hits, stats.misses) == (1, 3, 0), stats.guard_misses
    assert stats.verified_planned == (3 if hasattr(dg._C, "_VerifyCursor") else 0)
