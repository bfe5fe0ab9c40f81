"""Engine support for data-parallel training, on both engines: Tensor.register_post_accumulate_grad_hook and
autograd._queue_callback (Note [Final callbacks] in csrc/dyngrad/engine.h), and hooks that change their own list
while it runs (Note [Hooks that change hooks] in csrc/dyngrad/engine.h)."""
import numpy as np
import pytest


def leaf(dg, values):
    return dg.tensor(values, requires_grad=True)


# ---- register_post_accumulate_grad_hook ----

def test_post_accumulate_hook_sees_accumulated_grad(dg):
    x = leaf(dg, [1.0, 2.0])
    seen = []
    x.register_post_accumulate_grad_hook(lambda t: seen.append((t is x, t.grad.numpy().copy())))
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert [s[0] for s in seen] == [True, True]
    np.testing.assert_allclose(seen[0][1], [2.0, 4.0])
    np.testing.assert_allclose(seen[1][1], [5.0, 7.0])   # after accumulating into the existing .grad


def test_post_accumulate_hook_runs_once_per_backward_for_a_reused_leaf(dg):
    x = leaf(dg, [1.0])
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.item()))
    (x * x + x * 2 + x).sum().backward()
    assert calls == [5.0]


def test_post_accumulate_hook_can_modify_grad_in_place(dg):
    x = leaf(dg, [1.0, 2.0])

    def halve(t):
        with dg.no_grad():
            t.grad.mul_(0.5)
    x.register_post_accumulate_grad_hook(halve)
    (x * 4).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_post_accumulate_hook_remove(dg):
    x = leaf(dg, [1.0])
    calls = []
    handle = x.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    x.sum().backward()
    handle.remove()
    x.sum().backward()
    handle.remove()   # twice is harmless
    assert calls == [1]


def test_post_accumulate_hook_not_run_by_autograd_grad(dg):
    x = leaf(dg, [1.0])
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    (g,) = dg.autograd.grad((x * 2).sum(), x)
    assert calls == [] and x.grad is None and g.item() == 2.0


def test_post_accumulate_hook_runs_for_backward_inputs(dg):
    x, y = leaf(dg, [1.0]), leaf(dg, [2.0])
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append("x"))
    y.register_post_accumulate_grad_hook(lambda t: calls.append("y"))
    (x * y).sum().backward(inputs=[x])
    assert calls == ["x"] and y.grad is None


def test_post_accumulate_hook_errors(dg):
    x = leaf(dg, [1.0])
    with pytest.raises(RuntimeError, match="register_post_accumulate_grad_hook: .*doesn't require gradient"):
        dg.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="register_post_accumulate_grad_hook: .*non-leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="register_post_accumulate_grad_hook: hook must be callable"):
        x.register_post_accumulate_grad_hook(3)
    x.register_post_accumulate_grad_hook(lambda t: t)
    with pytest.raises(RuntimeError, match="post-accumulate-grad hook must return None"):
        x.sum().backward()


# ---- Note [Hooks that change hooks] ----

def test_post_accumulate_hook_removing_itself_and_registering_another(dg):
    x = leaf(dg, [1.0])
    calls, handles = [], {}

    def first(t):
        calls.append("first")
        handles["first"].remove()
        handles["late"] = t.register_post_accumulate_grad_hook(lambda t: calls.append("late"))

    def second(t):
        calls.append("second")
        handles["third"].remove()                       # a hook later in the same list

    handles["first"] = x.register_post_accumulate_grad_hook(first)
    handles["second"] = x.register_post_accumulate_grad_hook(second)
    handles["third"] = x.register_post_accumulate_grad_hook(lambda t: calls.append("third"))
    x.sum().backward()
    # as torch: the list was copied when backward reached it, so `third` still runs this time and `late` waits
    assert calls == ["first", "second", "third"]
    calls.clear()
    x.sum().backward()
    assert calls == ["second", "late"]


def test_grad_hooks_removing_themselves_during_backward(dg):
    x = leaf(dg, [1.0, 2.0])
    h = x * 1
    handles = []
    handles.append(x.register_hook(lambda g: handles[0].remove()))            # a leaf hook
    handles.append(h.register_hook(lambda g: (handles[1].remove(), g * 3)[1]))  # a non-leaf hook
    h.register_hook(lambda g: [h.register_hook(lambda g2: g2 * 100)] and None)  # registers another
    (h * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])


# ---- autograd._queue_callback ----

def test_queue_callback_outside_backward_raises(dg):
    with pytest.raises(RuntimeError, match="queue_callback: .*backward pass runs"):
        dg.autograd._queue_callback(lambda: None)
    x = leaf(dg, [1.0])
    x.register_post_accumulate_grad_hook(lambda t: dg.autograd._queue_callback(5))
    with pytest.raises(TypeError, match="_queue_callback: callback must be callable"):
        x.sum().backward()


def test_queue_callback_runs_after_every_node_before_backward_returns(dg):
    a, b = leaf(dg, [1.0]), leaf(dg, [2.0])
    events = []

    def at_end():
        events.append(("callback", a.grad is not None and b.grad is not None, dg.is_grad_enabled()))
        dg.autograd._queue_callback(lambda: events.append(("queued by a callback",)))

    def hook(t):
        events.append(("hook",))
        if len(events) == 1:
            dg.autograd._queue_callback(at_end)
    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    (a * b).sum().backward()
    events.append(("returned",))
    assert events == [("hook",), ("hook",), ("callback", True, True), ("queued by a callback",), ("returned",)]
    events.clear()
    (a * b).sum().backward()                       # the list was emptied: a new backward starts afresh
    assert events[-1] == ("queued by a callback",)


def test_queue_callback_error_propagates_and_engine_recovers(dg):
    x = leaf(dg, [1.0])

    def fail():
        raise ValueError("callback failed")
    handle = x.register_post_accumulate_grad_hook(lambda t: dg.autograd._queue_callback(fail))
    with pytest.raises(ValueError, match="callback failed"):
        (x * 2).sum().backward()
    handle.remove()
    (x * 2).sum().backward()
    assert x.grad.item() == 4.0


def test_queue_callback_in_nested_backward_has_its_own_list(dg):
    x, y = leaf(dg, [1.0]), leaf(dg, [3.0])
    events = []

    def inner_hook(t):
        dg.autograd._queue_callback(lambda: events.append("inner"))

    def outer_hook(t):
        dg.autograd._queue_callback(lambda: events.append("outer"))
        with dg.enable_grad():                     # hooks run in no_grad mode (create_graph=False)
            (y * 2).sum().backward()               # a separate graph, backpropagated from inside a hook
        events.append("inner returned")
    y.register_post_accumulate_grad_hook(inner_hook)
    x.register_post_accumulate_grad_hook(outer_hook)
    x.sum().backward()
    assert events == ["inner", "inner returned", "outer"]


def test_queue_callback_from_autograd_grad(dg):
    x = leaf(dg, [1.0])
    events = []
    (x * 1).register_hook(lambda g: None)
    y = x * 2
    y.register_hook(lambda g: dg.autograd._queue_callback(lambda: events.append("done")))
    dg.autograd.grad(y.sum(), x)
    assert events == ["done"]
