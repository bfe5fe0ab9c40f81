"""The planned backward of static replay (Note [The backward as a recorded program] in
csrc/bindings/replay_backward.cpp), on both engines: where the plan covers a program its replay runs the forward
without nodes and the backward from the plan; everywhere else (hooks, retain_graph, create_graph, anomaly mode,
saved-tensor hooks, custom Functions, retain_grad, externals with history, in-place ops on the graph, an output
whose node saved nothing) it runs as before. Every result is compared with eager mode's, bitwise. The reference
engine has no plan: the same programs give the same results there."""
import numpy as np
import pytest

from helpers import assert_bitwise_equal as assert_same


def static(dg, fn):
    return dg.compile(fn, mode="reduce-overhead")


def natives(compiled):
    return [v.native() for group in compiled._program.groups.values() for v in group]


def planned_runs(compiled):
    return sum(n.planned_runs for n in natives(compiled) if n is not None and hasattr(n, "planned_runs"))


def reasons(compiled):
    return [v.plan_reason for group in compiled._program.groups.values() for v in group]


def has_plan(dg):
    return hasattr(dg._C, "_plan_backward")


def params(dg, seed, *shapes):
    rng = np.random.default_rng(seed)
    return [dg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]


def chain_program(dg, a, b, rounds=20):
    def f(x):
        y = x
        for _ in range(rounds):
            y = (y * a + b).tanh()
        y.sum().backward()
        return y
    return f


def compare_calls(dg, fn_c, fn_e, leaves_c, leaves_e, inputs, between=None):
    """Calls the compiled and the eager program on each input; outputs and every leaf's .grad must be equal."""
    compiled = static(dg, fn_c)
    for i, x in enumerate(inputs):
        if between is not None:
            between(i)
        out_c, out_e = compiled(dg.tensor(x)), fn_e(dg.tensor(x))
        assert_same(out_c, out_e)
        assert out_c.requires_grad == out_e.requires_grad
        assert (out_c.grad_fn is None) == (out_e.grad_fn is None)
        if out_e.grad_fn is not None:
            assert out_c.grad_fn.name() == out_e.grad_fn.name()
        for p, q in zip(leaves_c, leaves_e):
            assert (p.grad is None) == (q.grad is None)
            if q.grad is not None:
                assert_same(p.grad, q.grad)
    return compiled


INPUTS = [np.linspace(-1, 1, 6).astype(np.float32) * k for k in (1.0, 0.5, -2.0, 1.5, 0.25)]


def test_chain_takes_the_plan(dg):
    """200-op-like chain with closed-over parameters: .grad accumulates over calls exactly as in eager mode."""
    pc, pe = params(dg, 0, (6,), (6,)), params(dg, 0, (6,), (6,))
    compiled = compare_calls(dg, chain_program(dg, *pc), chain_program(dg, *pe), pc, pe, INPUTS)
    stats = compiled.compile_stats
    assert stats.replays == 4
    if has_plan(dg):
        assert reasons(compiled) == [None] and planned_runs(compiled) == 4
        assert stats.planned_backwards == 4 and stats.as_dict()["backward_plans"] == [None]
    else:
        assert stats.planned_backwards == 0


def test_returned_output_is_released(dg):
    """An output with history gets a released grad_fn of its node's name: a second backward raises as eagerly."""
    pc, pe = params(dg, 1, (6,), (6,)), params(dg, 1, (6,), (6,))
    compiled = compare_calls(dg, chain_program(dg, *pc), chain_program(dg, *pe), pc, pe, INPUTS[:3])
    out_c, out_e = compiled(dg.tensor(INPUTS[0])), chain_program(dg, *pe)(dg.tensor(INPUTS[0]))
    for out in (out_c, out_e):
        with pytest.raises(RuntimeError, match="already freed"):
            (out * 2).sum().backward()
    for p, q in zip(pc, pe):
        assert_same(p.grad, q.grad)


@pytest.mark.parametrize("optimizer", ["SGD", "SGD-momentum", "Adam"])
def test_training_step_takes_the_plan(dg, optimizer):
    make = {"SGD": lambda ps: dg.optim.SGD(ps, lr=0.1),
            "SGD-momentum": lambda ps: dg.optim.SGD(ps, lr=0.1, momentum=0.9),
            "Adam": lambda ps: dg.optim.Adam(ps, lr=0.01)}[optimizer]

    def build():
        dg.manual_seed(3)
        model = dg.nn.Sequential(dg.nn.Linear(6, 16), dg.nn.ReLU(), dg.nn.Linear(16, 3))
        opt = make(model.parameters())

        def step(x, y):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return model, step
    model_c, step_c = build()
    model_e, step_e = build()
    compiled = static(dg, step_c)
    rng = np.random.default_rng(4)
    for _ in range(8):
        x, y = rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5)
        assert_same(compiled(dg.tensor(x), dg.tensor(y)), step_e(dg.tensor(x), dg.tensor(y)))
        for p, q in zip(model_c.parameters(), model_e.parameters()):
            assert_same(p, q)
            assert_same(p.grad, q.grad)
    if has_plan(dg):
        assert planned_runs(compiled) >= 4


def _program_cases(dg):
    """name -> (program(params) -> f(x), the reason the recording gives no plan; None: a program static replay
    runs eagerly anyway, Note [Steps that stay eager] in capture.py)."""
    class Double(dg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def retain_graph(a, b):
        def f(x):
            y = (x * a + b).tanh()
            y.sum().backward(retain_graph=True)
            return y.detach()
        return f

    def create_graph(a, b):
        def f(x):
            y = (x * a + b).tanh()
            y.sum().backward(create_graph=True)
            return y.detach()
        return f

    def hook(a, b):
        def f(x):
            h = x * a
            h.register_hook(lambda g: g * 3)
            y = (h + b).tanh()
            y.sum().backward()
            return y.detach()
        return f

    def retain_grad(a, b):
        def f(x):
            h = x * a
            h.retain_grad()
            y = (h + b).tanh()
            y.sum().backward()
            return h.grad
        return f

    def custom_function(a, b):
        def f(x):
            y = Double.apply(x * a + b).tanh()
            y.sum().backward()
            return y.detach()
        return f

    def external_with_history(a, b):
        c = a + 1              # closed over, made outside the program: its graph is not the program's (AddBackward
                               # saves nothing, so every call's backward runs through it again)
        def f(x):
            y = (x * c + b).tanh()
            y.sum().backward()
            return y.detach()
        return f

    def in_place(a, b):
        def f(x):
            h = x * a
            s = (h + b).sum()
            h.add_(1)          # h's history is rebased: MulBackward is no slot's grad_fn any more
            s.backward()
            return h.detach()
        return f

    def unsaved_output(a, b):
        def f(x):
            s = (x * a + b).sum()
            s.backward()
            return s           # SumBackward saved nothing: eager mode's second backward through it would run
        return f

    def saved_tensor_hooks(a, b):
        def f(x):
            with dg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                y = (x * a + b).tanh()
            y.sum().backward()
            return y.detach()
        return f

    return {"retain_graph": (retain_graph, "retain_graph"), "create_graph": (create_graph, "create_graph"),
            "hook": (hook, None), "retain_grad": (retain_grad, "retain"),
            "custom_function": (custom_function, None),
            "external_with_history": (external_with_history, "history"),
            "in_place": (in_place, "grad_fn"), "unsaved_output": (unsaved_output, "read after the backward"),
            "saved_tensor_hooks": (saved_tensor_hooks, None)}


@pytest.mark.parametrize("case", ["retain_graph", "create_graph", "hook", "retain_grad", "custom_function",
                                  "external_with_history", "in_place", "unsaved_output", "saved_tensor_hooks"])
def test_programs_the_plan_does_not_cover(dg, case):
    make, why = _program_cases(dg)[case]
    pc, pe = params(dg, 5, (6,), (6,)), params(dg, 5, (6,), (6,))
    compiled = compare_calls(dg, make(*pc), make(*pe), pc, pe, INPUTS)
    if why is None:
        assert compiled.compile_stats.eager_calls > 0 and compiled.compile_stats.replays == 0
    if has_plan(dg):
        assert planned_runs(compiled) == 0
        if why is not None:
            assert all(r is not None and why in r for r in reasons(compiled)), reasons(compiled)


def test_state_that_changes_between_calls_falls_back(dg):
    """Anomaly mode, saved-tensor hooks, a leaf hook, or a parameter that stops requiring grad, set between calls:
    those calls run as before (and equal eager mode), the others take the plan."""
    pc, pe = params(dg, 6, (6,), (6,)), params(dg, 6, (6,), (6,))
    seen = {"c": 0, "e": 0}
    f_c, f_e = chain_program(dg, *pc, rounds=5), chain_program(dg, *pe, rounds=5)
    compiled = static(dg, f_c)
    packed = {"n": 0}

    def pack(t):
        packed["n"] += 1
        return t

    def call(x, wrap=None):
        for fn, ps in ((compiled, pc), (f_e, pe)):
            if wrap is None:
                out = fn(dg.tensor(x))
            else:
                with wrap():
                    out = fn(dg.tensor(x))
            yield out, ps

    def check(x, wrap=None):
        (oc, _), (oe, _) = call(x, wrap)
        assert_same(oc, oe)
        for p, q in zip(pc, pe):
            assert (p.grad is None) == (q.grad is None)
            if q.grad is not None:
                assert_same(p.grad, q.grad)

    check(INPUTS[0])
    check(INPUTS[1])
    base = planned_runs(compiled)
    check(INPUTS[2], dg.autograd.detect_anomaly)
    packed["n"] = 0
    check(INPUTS[3], lambda: dg.autograd.graph.saved_tensors_hooks(pack, lambda t: t))
    assert packed["n"] > 0 and packed["n"] % 2 == 0        # the same saves in the replay as in the eager call
    handles = [pc[0].register_hook(lambda g: seen.__setitem__("c", seen["c"] + 1)),
               pe[0].register_hook(lambda g: seen.__setitem__("e", seen["e"] + 1))]
    check(INPUTS[4])
    assert seen["c"] == seen["e"] == 1
    for h in handles:
        h.remove()
    if has_plan(dg):
        assert planned_runs(compiled) == base
    check(INPUTS[0])
    if has_plan(dg):
        assert planned_runs(compiled) == base + 1
    for p in pc + pe:
        p.grad = None
    pc[1].requires_grad_(False)
    pe[1].requires_grad_(False)
    check(INPUTS[1])
    assert pc[1].grad is None and pe[1].grad is None


def test_split_results_and_inner_views_take_the_plan(dg):
    """A step returning a tuple of tensors (split: Note [Sequence results in the loop]) and a matmul of a 3-d
    operand, which saves a 2-d view of it made inside the step: both planned, equal to eager mode."""
    pc, pe = params(dg, 7, (4, 3), (3,)), params(dg, 7, (4, 3), (3,))

    def program(w, b):
        def f(x):
            h = (x.reshape(2, 3, 4) @ w + b).tanh()      # (2, 3, 3)
            first, second = h.split([1, 2], dim=1)
            y = (first * second.sum(1, keepdim=True)).relu()
            y.sum().backward()
            return y
        return f
    inputs = [np.linspace(-1, 1, 24).astype(np.float32) * k for k in (1.0, -0.5, 2.0, 0.75)]
    compiled = compare_calls(dg, program(*pc), program(*pe), pc, pe, inputs)
    assert compiled.compile_stats.replays == 3
    if has_plan(dg):
        assert reasons(compiled) == [None] and planned_runs(compiled) == 3
        assert min(n.python_steps for n in natives(compiled)) == 0


def test_more_programs_take_the_plan(dg):
    """A given gradient (backward(g)), a no_grad block inside the forward, two outputs with history, a second
    forward and backward after the planned one (run over its own graph), two roots, and gradients cast and summed to
    their inputs' dtypes and shapes: all equal to eager mode."""
    def given_gradient(a, b):
        def f(x):
            y = (x * a + b).exp()
            y.backward(x * 0.5)
            return y
        return f

    def no_grad_block(a, b):
        def f(x):
            with dg.no_grad():
                scale = (a * 2).sum()
            y = (x * a * scale + b).sigmoid()
            y.sum().backward()
            return y, scale
        return f

    def two_outputs(a, b):
        def f(x):
            h = (x * a).tanh()
            y = (h * b).exp()
            y.sum().backward()
            return h, y
        return f

    def second_backward(a, b):
        def f(x):
            (x * a + b).tanh().sum().backward()
            z = (x * b).sigmoid()
            z.sum().backward()
            return z
        return f

    def two_roots(a, b):
        def f(x):
            h = (x * a).tanh()
            dg.autograd.backward([(h * b).sum(), (h + b).exp().sum()])
            return h
        return f

    def mixed_dtypes(a, b):
        def f(x):
            y = (x.to(dg.float64) * a + b[:1]).sin()       # float32 parameters, float64 and broadcast gradients
            y.sum().backward()
            return y
        return f

    for make in (given_gradient, no_grad_block, two_outputs, second_backward, two_roots, mixed_dtypes):
        pc, pe = params(dg, 8, (6,), (6,)), params(dg, 8, (6,), (6,))
        compiled = static(dg, make(*pc))
        f_e = make(*pe)
        for x in INPUTS:
            outs_c, outs_e = compiled(dg.tensor(x)), f_e(dg.tensor(x))
            outs_c = outs_c if isinstance(outs_c, tuple) else (outs_c,)
            outs_e = outs_e if isinstance(outs_e, tuple) else (outs_e,)
            for oc, oe in zip(outs_c, outs_e):
                assert_same(oc, oe)
                assert oc.requires_grad == oe.requires_grad
                assert (oc.grad_fn is None) == (oe.grad_fn is None)
            for p, q in zip(pc, pe):
                assert_same(p.grad, q.grad)
        assert compiled.compile_stats.replays == 4, make.__name__
        if has_plan(dg):
            assert reasons(compiled) == [None], (make.__name__, reasons(compiled))
            assert planned_runs(compiled) == 4


def test_variants_sharing_the_planned_backward(dg):
    """Two variants that share the steps up to and past the backward (a guard after it picks the output) share its
    plan; each gives its own output a released grad_fn, or none, as eager mode does. A run that leaves its variant
    after a planned backward (a sibling, or a miss and its catch-up) gives every tensor that had history one."""
    def program(a, b):
        def f(x):
            y = (x * a + b).tanh()
            y.sum().backward()
            if x.sum() > 0:           # a value guard after the backward
                return y
            return (x * 2).detach()
        return f
    def reads_after_a_miss(a, b):
        def f(x):
            h = x * a
            y = (h + b).tanh()
            y.sum().backward()
            if x.sum() > 0:
                return y.detach()
            return h * 3              # after the miss, the catch-up's Python reads h: it has history, as eagerly
        return f
    for make in (program, reads_after_a_miss):
        pc, pe = params(dg, 9, (6,), (6,)), params(dg, 9, (6,), (6,))
        inputs = [INPUTS[0] + 1, INPUTS[0] - 1, INPUTS[0] + 1, INPUTS[0] - 1, INPUTS[0] + 1]
        compiled = compare_calls(dg, make(*pc), make(*pe), pc, pe, inputs)
        assert compiled.compile_stats.variants == 2 and compiled.compile_stats.replays == 3
        if has_plan(dg):
            assert compiled.compile_stats.backward_plans == [None, None]
            assert compiled.compile_stats.planned_backwards >= 3


def test_saved_tensor_modified_in_place_raises_as_eagerly(dg):
    """A tensor saved for the backward and then written in place (the version counter): the compiled call raises
    eager mode's error, on both engines, and leaves the gradients as eager mode does."""
    def program(a, b):
        def f(x):
            h = x * a
            y = h.exp()               # saves its output
            y.add_(1)                 # ... which is then written in place
            y.sum().backward()
            return y
        return f
    pc, pe = params(dg, 10, (6,), (6,)), params(dg, 10, (6,), (6,))
    compiled = static(dg, program(*pc))
    for x in INPUTS[:3]:
        with pytest.raises(RuntimeError, match="modified in place") as got:
            compiled(dg.tensor(x))
        with pytest.raises(RuntimeError, match="modified in place") as want:
            program(*pe)(dg.tensor(x))
        assert str(got.value).split(" (")[0] == str(want.value).split(" (")[0]
        for p, q in zip(pc, pe):
            assert (p.grad is None) == (q.grad is None)
